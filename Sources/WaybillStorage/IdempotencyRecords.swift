public import Foundation
public import WaybillDomain

/// The store's side of `Idempotency-Key` (SPEC §2, "Idempotent retries"): one record per user and
/// key, claimed before the request runs and holding its response once it ran.
///
/// The record lives in the store, not in a node's memory, so a retry that reaches another node of
/// a cluster finds it. A record is *in progress* from its claim until its response is stored;
/// only the claim's `token` may store that response or give the claim up, so a request whose
/// claim was taken over (see `IdempotencyRecord.verdict`) can no longer record anything.
/// See docs/PROTOCOL.md, "Idempotent retries", for the whole protocol.
public protocol IdempotencyRecords {
    /// Claims `request.key` for `request.userID`, or says why not.
    ///
    /// No record: one is inserted in progress with `token` → `.claimed`. Otherwise the existing
    /// record decides (`IdempotencyRecord.verdict`); a stale claim is taken over by `token`.
    /// Concurrent claims of one key serialize (on PostgreSQL the loser waits for the winner's
    /// transaction, then sees its record): exactly one caller gets `.claimed`.
    func claimIdempotencyKey(
        _ request: IdempotentRequest, token: String, at now: Date, staleAfter: TimeInterval
    ) throws -> IdempotencyClaim

    /// Stores the response of a claimed request, if `token` still holds the claim and no
    /// response is stored yet; returns whether it did.
    ///
    /// Called inside the transaction that applies the request, so the change and its record
    /// commit together: a retry can never find the change without the response, or run it twice.
    func completeIdempotencyKey(
        _ key: String, of user: UserID, token: String, response: StoredResponse, at now: Date
    ) throws -> Bool

    /// Deletes the record if `token` still holds it in progress (the request failed on the
    /// server's side and changed nothing: a retry runs it again). A completed record stays.
    func releaseIdempotencyKey(_ key: String, of user: UserID, token: String) throws

    /// The record of `key` for `user`, if any.
    func idempotencyRecord(_ key: String, of user: UserID) throws -> IdempotencyRecord?

    /// Deletes records last written (claimed, taken over or completed) before `cutoff`; returns how many went;
    /// at most `limit` (the pruner deletes in chunks, one short transaction each).
    func pruneIdempotencyKeys(before cutoff: Date, limit: Int) throws -> Int
}

/// A request made under an `Idempotency-Key`, as the store keys and compares it.
public struct IdempotentRequest: Sendable, Hashable {
    public var userID: UserID
    /// The header's value: 1–255 printable ASCII characters (checked by the API).
    public var key: String
    public var method: String
    public var path: String
    /// SHA-256 of method, path and body: a repeat of the key must match it exactly.
    public var fingerprint: [UInt8]

    public init(userID: UserID, key: String, method: String, path: String, fingerprint: [UInt8]) {
        self.userID = userID
        self.key = key
        self.method = method
        self.path = path
        self.fingerprint = fingerprint
    }
}

/// An HTTP response as stored for replay: status, the handler's own headers, body.
public struct StoredResponse: Sendable, Hashable {
    public var status: Int
    /// `(name, value)` pairs in order (ETag, Content-Type, Location…); never the server's common headers.
    public var headers: [Header]
    public var body: [UInt8]

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(status: Int, headers: [Header], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The headers as stored: one `name: value` line each (HTTP field values hold no line breaks).
    public var headerText: String { headers.map { "\($0.name): \($0.value)" }.joined(separator: "\n") }

    /// Headers read back from `headerText`.
    public static func headers(fromText text: String) -> [Header] {
        text.split(separator: "\n").compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            let value = line[line.index(after: colon)...].drop { $0 == " " }
            return Header(name: String(line[..<colon]), value: String(value))
        }
    }
}

/// What claiming a key gave.
public enum IdempotencyClaim: Sendable, Hashable {
    /// The caller holds the key: run the request, then complete (or release) with its token.
    case claimed
    /// The same request already ran: send this response again and change nothing.
    case replay(StoredResponse)
    /// The same request is still running (claimed less than `staleAfter` ago): 409.
    case inUse
    /// The key was used for another method, path or body: 422.
    case reused
}

/// One stored key: who claimed it for what, and the response once there is one.
public struct IdempotencyRecord: Sendable, Hashable {
    public var request: IdempotentRequest
    /// The current claim's token.
    public var token: String
    /// When the record was last written (claim, takeover, response): what pruning goes by.
    public var updatedAt: Date
    /// `nil` while the request is in progress.
    public var response: StoredResponse?

    public init(request: IdempotentRequest, token: String, updatedAt: Date, response: StoredResponse?) {
        self.request = request
        self.token = token
        self.updatedAt = updatedAt
        self.response = response
    }

    /// What a new request with this record's key gets. Both stores apply this one rule.
    public enum Verdict: Sendable, Hashable {
        case replay(StoredResponse)
        case inUse
        case reused
        /// The claim is older than `staleAfter` with no response: its node most likely died
        /// mid-request. The new request takes it over (safe, see docs/PROTOCOL.md).
        case takeOver
    }

    /// A different fingerprint is `reused` whatever the state; a stored response is replayed;
    /// an in-progress claim is `inUse` until it is `staleAfter` old, then taken over.
    public func verdict(for other: IdempotentRequest, at now: Date, staleAfter: TimeInterval) -> Verdict {
        guard other.fingerprint == request.fingerprint else { return .reused }
        if let response { return .replay(response) }
        return now.timeIntervalSince(updatedAt) >= staleAfter ? .takeOver : .inUse
    }
}

extension IdempotencyRecords {
    /// Every record due at once (tests, small stores).
    public func pruneIdempotencyKeys(before cutoff: Date) throws -> Int {
        try pruneIdempotencyKeys(before: cutoff, limit: .max)
    }
}
