import Foundation
import Synchronization
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

/// Applies each order write that carries an `Idempotency-Key` once per user and key (SPEC §2,
/// "Idempotent retries"; decisions in docs/PROTOCOL.md).
///
/// 1. Claim the key in a short write of its own (`claimIdempotencyKey`): a repeat of a finished
///    request is replayed, one of a running request gets 409, another request under the key 422.
/// 2. Run the handler. Its order write stores the response in the same transaction as the change
///    (`IdempotentWrite`), so nothing can commit the change without the response.
/// 3. A 4xx answer changed nothing and is stored afterwards, as the key's answer; a 5xx answer
///    releases the claim (nothing changed, or the change committed with its response and the
///    release finds nothing to release), so a retry runs the request again. Neither waits more
///    than `followUpWait` for that second store call (it goes on alone after that).
struct IdempotencyGuard: Sendable {
    let store: any OrderStore
    let clock: any WallClock
    /// A claim this old with no response is taken over by a repeat: its node most likely died.
    let claimTimeout: Duration
    let logger: Logger

    /// Whether a route takes `Idempotency-Key`: every POST, PATCH and DELETE under `/api/orders`.
    static func covers(method: String, pattern: String) -> Bool {
        ["POST", "PATCH", "DELETE"].contains(method) && (pattern == "/api/orders" || pattern.hasPrefix("/api/orders/"))
    }

    /// `handler`, guarded.
    func wrap(_ handler: @escaping Router.Handler) -> Router.Handler {
        { request, context in try await self.respond(to: request, context, handler) }
    }

    /// Answers `request` through `handler`, at most once per user and key (the steps above);
    /// without the header, just `handler`. - Throws: 400, 401, 409 and 422 of its own, or the handler's 5xx.
    func respond(
        to request: HTTPRequest, _ context: RequestContext, _ handler: Router.Handler
    ) async throws -> HTTPResponse {
        guard let header = request.headers["idempotency-key"], !header.isEmpty else {
            return try await handler(request, context)
        }
        // Keys are scoped to the user, and a request without a valid token gets its 401 whatever
        // else is wrong with it (PROTOCOL.md): the token before the key's shape.
        let user = try await context.requireUser().id
        guard let key = try IdempotencyKey.parse(request) else { return try await handler(request, context) }
        let incoming = IdempotentRequest(
            userID: user, key: key.value, method: request.method, path: Self.path(of: request),
            fingerprint: Self.fingerprint(request))
        let claim = IdempotentWrite(userID: user, key: key.value, token: Crypto.base64URL(Crypto.randomBytes(16)))
        let now = clock.now(), timeout = claimTimeout.timeInterval
        let claimed: IdempotencyClaim
        do {
            claimed = try await store.write { tx in
                try tx.claimIdempotencyKey(incoming, token: claim.token, at: now, staleAfter: timeout)
            }
        } catch {
            // A claim whose COMMIT's outcome is unknown (the connection broke during it) may have
            // landed: every retry then got 409 "still running" for the claim's 30 s, though nothing
            // ran (found by a review). The handler has not run, so the claim is released like a 5xx's.
            if APIError(error).status >= 500 { await followUp { await self.release(claim) } }
            throw error
        }
        switch claimed {
        case .claimed: break
        case .replay(let stored): return Self.replay(stored)
        case .inUse: throw APIError.idempotencyKeyInUse
        case .reused: throw APIError.idempotencyKeyReused
        }

        let response: HTTPResponse
        do {
            response = try await IdempotentWrite.$current.withValue(claim) { try await handler(request, context) }
        } catch is IdempotentWrite.ClaimLost {
            return try await answerAfterLosing(claim, incoming)
        } catch {
            let failure = APIError(error)
            guard failure.status < 500 else {
                await followUp { await self.release(claim) }
                throw error
            }
            var answer = JSONCoding.error(failure)
            if let seconds = failure.retryAfter { answer.headers.set("Retry-After", "\(seconds)") }
            let stored = answer
            await followUp { await self.storeAfterwards(stored, for: claim) }
            return answer
        }
        // A route whose write does not store its answer in its own transaction (none of today's
        // order writes): stored now, a moment after the change committed.
        if claim.storedResponse == nil {
            let stored = response
            await followUp { await self.storeAfterwards(stored, for: claim) }
        }
        return response
    }

    /// SHA-256 of method, path and body, NUL-separated (neither method nor path holds a NUL).
    static func fingerprint(_ request: HTTPRequest) -> [UInt8] {
        Crypto.sha256(Array(request.method.utf8) + [0] + Array(path(of: request).utf8) + [0] + request.body)
    }

    /// The path as the router sees it, its segments joined by one `/`: trailing slashes are
    /// optional and empty segments ignored, so `/api/orders/7/` and `/api/orders//7` are
    /// `/api/orders/7` for a key too (16 KB of slashes made every stored record 16 KB; found by a
    /// review). The query is not part of it (no write reads one).
    static func path(of request: HTTPRequest) -> String {
        "/" + Router.split(request.path).joined(separator: "/")
    }

    /// The stored answer again, marked as a replay.
    static func replay(_ stored: StoredResponse) -> HTTPResponse {
        var headers = HTTPHeaders(stored.headers.map { ($0.name, $0.value) })
        headers.set("Idempotent-Replayed", "true")
        return HTTPResponse(status: stored.status, headers: headers, body: stored.body)
    }

    /// A repeat took this request's stale claim over while it ran; this request's write was
    /// rolled back. The repeat's stored answer if it has one, else 409 as for any repeat.
    private func answerAfterLosing(_ claim: IdempotentWrite, _ incoming: IdempotentRequest) async throws -> HTTPResponse
    {
        let record = try await store.write { tx in try tx.idempotencyRecord(claim.key, of: claim.userID) }
        if let record, record.request.fingerprint == incoming.fingerprint, let response = record.response {
            return Self.replay(response)
        }
        throw APIError.idempotencyKeyInUse
    }

    private func storeAfterwards(_ response: HTTPResponse, for claim: IdempotentWrite) async {
        let now = clock.now()
        do {
            _ = try await store.write { tx in
                try tx.completeIdempotencyKey(
                    claim.key, of: claim.userID, token: claim.token, response: StoredResponse(response), at: now)
            }
        } catch {
            // The claim stays in progress until it is stale: repeats get 409 until then.
            logger.warning("idempotency response not stored", ["error": "\(error)"])
        }
    }

    /// How long an answer waits for the store call that follows the handler: a 5xx's release of the
    /// claim, a 4xx's storing as the key's answer. The handler may have used most of the request's
    /// time already (a frozen PostgreSQL answers 503 after 4.5 s, or a 412 after a 1 s rollback),
    /// and the follow-up is one more store call with a budget of its own: waited for in full, the
    /// answer came after 5.5–9 s instead of within SPEC §6's 5 s (found by reviews: the 5xx, then
    /// the 4xx). Past this it goes on alone; a retry that comes first gets 409
    /// `idempotency_key_in_use`, which clients retry.
    static let followUpWait: Duration = .milliseconds(250)

    /// `work`, waited for at most `followUpWait` (it goes on after that).
    private func followUp(_ work: @escaping @Sendable () async -> Void) async {
        let limit = Self.followUpWait
        final class Waiter: Sendable {
            let continuation = Mutex<CheckedContinuation<Void, Never>?>(nil)
            func resume() { continuation.withLock { $0.take() }?.resume() }
        }
        let waiter = Waiter()
        let releasing = Task { await work() }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiter.continuation.withLock { $0 = continuation }
            let timer = Task {
                try? await Task.sleep(for: limit)
                waiter.resume()
            }
            Task {
                await releasing.value
                timer.cancel()
                waiter.resume()
            }
        }
    }

    private func release(_ claim: IdempotentWrite) async {
        do {
            try await store.write { tx in try tx.releaseIdempotencyKey(claim.key, of: claim.userID, token: claim.token)
            }
        } catch {
            logger.warning("idempotency claim not released", ["error": "\(error)"])
        }
    }
}
