public import Foundation

/// One driver action in the offline queue, with everything needed to send it again after a restart.
///
/// Its ``id`` is also its `Idempotency-Key`: chosen at random when the driver acts and never changed, so
/// every retry (after a lost response, a 503, an app restart) names the same request and the server
/// applies it at most once.
public struct QueuedAction: Hashable, Sendable, Codable, Identifiable {
    /// The action's identity and its `Idempotency-Key` (32 hex digits).
    public let id: ActionID
    /// What the driver did.
    public let action: DriverAction
    /// The `If-Match` sent with it: the version the driver saw when acting (`nil`: no precondition).
    ///
    /// When an earlier queued action on the same order is applied, actions that expected the same version
    /// move on to the version that action created: the driver's own change must not refuse their next one.
    public internal(set) var ifMatch: String?
    /// The order's `created_at` as the session knew it when the driver acted (`nil`: not known), sent as
    /// `If-Order-Created`: after a restore the server can give the id to another order, and the action
    /// must not reach it (docs/PROTOCOL.md, "Writing without losing someone else's change").
    public let orderCreatedAt: Date?
    /// When the driver acted (wall clock); the queue gives up on an action older than its maximum age.
    public let queuedAt: Date
    /// The newest event the session had seen when the driver acted (its id and cursor), `nil` before
    /// the first socket went live: a new session over a stored queue resumes from the newest of these,
    /// so that a history that rewound since (a restore that lost the commits the driver saw) says
    /// `reset` before the queue goes (docs/PROTOCOL.md, "Offline actions").
    let seenEventID: EventID?
    let seenCursor: ResumeCursor?
    /// It was on its way when the socket said `reset`: if that send ends without an answer it is not
    /// sent again with its old `If-Match`, which may now name a version with other content.
    var sentBeforeReset = false
    /// A send of it ended without an answer (the connection dropped, a timeout, an unreadable answer,
    /// a proxy's 502 or 504, a 500) or met its own first attempt still running, or the app stopped
    /// while it was being sent: the server may have applied it. If the queue later gives up on it,
    /// the driver is told to check the order rather than that it was not sent.
    var mayHaveApplied = false
    /// Where the action stands now.
    public internal(set) var state: ActionState
    /// Attempts the server answered with a failure (5xx, unreadable answer); bounded by the queue's policy.
    public internal(set) var serverFailures: Int

    /// The order the action changes.
    public var orderID: OrderID { action.orderID }

    /// Where a session over `actions` (a stored queue) resumes from: the newest action's event and
    /// cursor, not the highest id, since ids from before and after an earlier `reset` do not compare.
    static func resumePoint(of actions: [QueuedAction]) -> (eventID: EventID, cursor: ResumeCursor?)? {
        guard let newest = actions.last(where: { $0.seenEventID != nil }), let eventID = newest.seenEventID else {
            return nil
        }
        return (eventID, newest.seenCursor)
    }

    init(
        id: ActionID, action: DriverAction, ifMatch: String?, orderCreatedAt: Date? = nil, queuedAt: Date,
        seenEventID: EventID? = nil, seenCursor: ResumeCursor? = nil
    ) {
        self.id = id
        self.action = action
        self.ifMatch = ifMatch
        self.orderCreatedAt = orderCreatedAt
        self.queuedAt = queuedAt
        self.seenEventID = seenEventID
        self.seenCursor = seenEventID == nil ? nil : seenCursor
        self.state = .waiting
        self.serverFailures = 0
    }

    /// The most server failures a stored action comes back with: far above any policy's limit.
    static let maxStoredServerFailures = 1_000_000

    private enum CodingKeys: String, CodingKey {
        case id, action, ifMatch = "if_match", queuedAt = "queued_at", serverFailures = "server_failures"
        case seenEventID = "seen_event_id", seenCursor = "seen_cursor", sentBeforeReset = "sent_before_reset"
        case mayHaveApplied = "may_have_applied", orderCreated = "order_created_ms"
    }

    /// Decodes a stored action; it is waiting again (a send cut short by a restart is retried with its key).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(ActionID.self, forKey: .id)
        action = try c.decode(DriverAction.self, forKey: .action)
        ifMatch = try c.decodeIfPresent(String.self, forKey: .ifMatch)
        // Whole milliseconds, as the header carries them (a `Date` would go through the encoder's format).
        orderCreatedAt = try c.decodeIfPresent(Int64.self, forKey: .orderCreated).map {
            Date(timeIntervalSince1970: Double($0) / 1000)
        }
        queuedAt = try c.decode(Date.self, forKey: .queuedAt)
        // Within what a queue can count: a damaged file's huge count trapped at the next server
        // error (`+= 1`), after every restart (found by a review, 2026-12-05).
        serverFailures = min(max(0, try c.decodeIfPresent(Int.self, forKey: .serverFailures) ?? 0), Self.maxStoredServerFailures)
        // Absent in a queue an older version wrote: that session then starts without a cursor.
        seenEventID = try c.decodeIfPresent(EventID.self, forKey: .seenEventID)
        seenCursor = seenEventID == nil ? nil : try c.decodeIfPresent(ResumeCursor.self, forKey: .seenCursor)
        sentBeforeReset = try c.decodeIfPresent(Bool.self, forKey: .sentBeforeReset) ?? false
        mayHaveApplied = try c.decodeIfPresent(Bool.self, forKey: .mayHaveApplied) ?? false
        state = .waiting
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(action, forKey: .action)
        try c.encodeIfPresent(ifMatch, forKey: .ifMatch)
        try c.encodeIfPresent(orderCreatedAt.flatMap(HTTPOrdersAPI.milliseconds), forKey: .orderCreated)
        try c.encode(queuedAt, forKey: .queuedAt)
        try c.encode(serverFailures, forKey: .serverFailures)
        try c.encodeIfPresent(seenEventID, forKey: .seenEventID)
        try c.encodeIfPresent(seenCursor, forKey: .seenCursor)
        if sentBeforeReset { try c.encode(true, forKey: .sentBeforeReset) }
        // Stored while it is being sent too: an app killed mid-send finds the mark at its next start.
        if mayHaveApplied || state == .sending { try c.encode(true, forKey: .mayHaveApplied) }
    }
}

/// The identity of a queued action, which is also the `Idempotency-Key` it is sent with.
public struct ActionID: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The key as sent (printable ASCII).
    public var rawValue: String
    /// Wraps a key.
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }

    /// 128 random bits as 32 lowercase hex digits, from the injected generator (seeded in tests).
    static func random(using generator: inout some RandomNumberGenerator) -> ActionID {
        let high = UInt64.random(in: .min ... .max, using: &generator)
        let low = UInt64.random(in: .min ... .max, using: &generator)
        func hex(_ value: UInt64) -> String {
            let digits = String(value, radix: 16)
            return String(repeating: "0", count: 16 - digits.count) + digits
        }
        return ActionID(rawValue: hex(high) + hex(low))
    }
}

/// Where a queued action stands, as the app shows it.
public enum ActionState: Hashable, Sendable {
    /// Accepted on the device, waiting to be sent ("accepted — waiting for coverage").
    case waiting
    /// Being sent right now.
    case sending
    /// The server applied it (or had already applied it: a replay of the stored answer). It left the queue.
    case applied
    /// The server refused it, or the queue gave up on it; it left the queue. Show `reason` to the driver.
    case refused(ActionRefusal)

    /// Whether the action is still in the queue (waiting or sending).
    public var isPending: Bool {
        switch self {
        case .waiting, .sending: true
        case .applied, .refused: false
        }
    }
}

/// Why an action was dropped from the queue.
public struct ActionRefusal: Hashable, Sendable, CustomStringConvertible {
    /// The HTTP status, when the server refused it (409, 412, 422, 404, 403, …); `nil` when the queue gave up.
    public var status: Int?
    /// The server's error code (`invalid_transition`, `precondition_failed`, …), or the queue's own:
    /// `expired` (older than the maximum age), `gave_up` (too many server failures or retries) or
    /// `history_rewound` (it names a version, and the socket said `reset`: docs/PROTOCOL.md).
    public var code: String
    /// Human-readable text.
    public var message: String

    /// A refusal with the given fields.
    public init(status: Int?, code: String, message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { status.map { "\($0) \(code): \(message)" } ?? "\(code): \(message)" }
}
