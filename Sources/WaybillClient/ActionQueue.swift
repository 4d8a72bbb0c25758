import Foundation

/// The offline queue's rules as a value (SPEC §5 rule 8): which action goes next, and what an answer means.
///
/// Actions go out in the order the driver made them, one at a time: a status change and then a stage of
/// the same order must not overtake each other. It never sleeps or does I/O; the session persists
/// ``actions`` after every change and runs the timers the returned steps ask for.
struct ActionQueue: Sendable {
    /// What the session must do next.
    enum Step: Hashable, Sendable {
        /// Send this action (it is now ``ActionState/sending``), then call ``finished(_:random:)``.
        case send(QueuedAction)
        /// The head must not be sent (too old, or it was on its way when a `reset` came and its send
        /// ended without an answer): it left the queue, refused. Report it and ask ``next(now:)`` again.
        case dropped(QueuedAction)
        /// Nothing to send now (empty, a send in flight, or backing off).
        case idle
    }

    /// How a send ended, in the queue's terms.
    enum Outcome: Hashable, Sendable {
        /// 2xx, or the stored answer of an earlier attempt (`Idempotent-Replayed: true`).
        case applied(SavedOrder)
        /// 2xx whose body could not be read (``WaybillClientError/isUnreadableSuccess``): applied;
        /// `etag` is the answer's `ETag`, if it had one.
        case appliedUnread(etag: String?)
        /// The server will never accept it: drop it and tell the driver.
        case refused(ActionRefusal)
        /// Try again later; `countsAsServerFailure` when the server answered (5xx) rather than being
        /// unreachable; `mayHaveApplied` when the send got no answer (or met its own first attempt
        /// still running), so the server may have applied it (``QueuedAction/mayHaveApplied``).
        case retry(countsAsServerFailure: Bool, mayHaveApplied: Bool = false)
    }

    /// What became of the action that was sending.
    enum Finish: Hashable, Sendable {
        /// It left the queue, applied; later actions may now name `saved`'s version.
        case applied(QueuedAction, SavedOrder)
        /// It left the queue, applied, but its answer was unreadable: the order must be fetched to be shown.
        case appliedUnread(QueuedAction)
        /// It left the queue, refused.
        case refused(QueuedAction)
        /// It waits again; call ``backoffElapsed()`` after `after`.
        case retry(QueuedAction, after: Duration)
        /// The session was stopped meanwhile (nothing was sending).
        case none
    }

    /// How the queue retries and when it gives up.
    let policy: ActionQueuePolicy
    /// Pending actions, oldest first; the first is the only one ever sending.
    private(set) var actions: [QueuedAction]
    /// Failed attempts in a row (any action), for the backoff delay; reset by a success or ``wake()``.
    private var failures = 0
    private(set) var isBackingOff = false

    init(policy: ActionQueuePolicy, actions: [QueuedAction] = []) {
        self.policy = policy
        self.actions = actions.map {
            var action = $0; action.state = .waiting; return action
        }
    }

    /// Whether an action is being sent.
    var isSending: Bool { actions.first?.state == .sending }

    /// The driver acted: the action waits behind every earlier one.
    mutating func add(_ action: QueuedAction) { actions.append(action) }

    /// The next step: send the head, expire it, or nothing.
    mutating func next(now: Date) -> Step {
        guard !isBackingOff, let head = actions.first, head.state == .waiting else { return .idle }
        if now.timeIntervalSince(head.queuedAt) > policy.maxAge.seconds {
            // The server keeps an idempotency key only so long: past it, a retry could apply twice.
            // One that went out without an answer may have been applied: the driver must check the
            // order, not do it again (found by a review: "not sent" made a driver attach twice).
            var expired = actions.removeFirst()
            let seconds = Int(policy.maxAge.seconds)
            expired.state = .refused(
                expired.mayHaveApplied
                    ? ActionRefusal(
                        status: nil, code: "unconfirmed",
                        message: "sent, but not confirmed within \(seconds) s: it may have been applied; check the order")
                    : ActionRefusal(status: nil, code: "expired", message: "not sent within \(seconds) s"))
            return .dropped(expired)
        }
        if head.sentBeforeReset {
            // It may have been applied, or not: sent again, its `If-Match` could match a repeated
            // version with other content, or its order id name another order (`historyRewound()`).
            var dropped = actions.removeFirst()
            dropped.state = .refused(Self.rewound(dropped))
            return .dropped(dropped)
        }
        actions[0].state = .sending
        return .send(actions[0])
    }

    /// The part of an order ETag that names its version: `"o42-v7-h0b7e55d1-s5"` → `"o42-v7"`: the
    /// order and version number, without the server's check of the version in its history (`-h…`)
    /// or the receipt it adds (`-s<version>`; SPEC §2, docs/PROTOCOL.md). Any other tag is returned
    /// unchanged. For comparing the driver's own actions with each other only: what goes out as
    /// `If-Match` keeps the check, so the server can tell a version of another history.
    static func versionTag(_ tag: String) -> String {
        guard tag.count > 2, tag.hasPrefix("\""), tag.hasSuffix("\"") else { return tag }
        let parts = tag.dropFirst().dropLast().split(separator: "-", omittingEmptySubsequences: false)
        func isNumber(_ part: Substring, after prefix: Character) -> Bool {
            part.first == prefix && part.count > 1 && part.dropFirst().allSatisfy { $0.isASCII && $0.isNumber }
        }
        guard parts.count >= 2, parts.count <= 4, isNumber(parts[0], after: "o"), isNumber(parts[1], after: "v") else {
            return tag
        }
        for part in parts.dropFirst(2) where !(isNumber(part, after: "s") || part.first == "h") { return tag }
        return "\"" + parts[0] + "-" + parts[1] + "\""
    }

    /// Later actions on `order` whose `If-Match` names `expected` (`"o42-v7"`, `"o42-v7-h…"` and
    /// `"o42-v7-h…-s7"`, with the driver's receipt, name one version) now name `tag`.
    private mutating func moveOn(_ order: OrderID, from expected: String, to tag: String) {
        for index in actions.indices where actions[index].orderID == order {
            if let current = actions[index].ifMatch, Self.versionTag(current) == expected { actions[index].ifMatch = tag }
        }
    }

    /// The order and version a version tag names (`"o42-v7-h…-s7"` → (42, 7)), nil for a tag of
    /// another shape.
    static func orderVersion(of tag: String) -> (order: OrderID, version: Int64)? {
        let parts = versionTag(tag).dropFirst().dropLast().split(separator: "-")
        guard parts.count == 2, parts[0].first == "o", parts[1].first == "v",
            let order = Int64(parts[0].dropFirst()), let version = Int64(parts[1].dropFirst())
        else { return nil }
        return (OrderID(order), version)
    }

    /// The version tag after `tag` (`"o42-v8"` for `"o42-v7"`), nil for a tag of another shape.
    static func tagAfter(_ tag: String) -> String? {
        guard let named = orderVersion(of: tag), named.version >= 0, named.version < Int64.max else { return nil }
        return ExpectedVersion.etag(of: named.order, version: named.version + 1)
    }

    /// The version tag before `tag` (`"o42-v7"` for `"o42-v8-h…"`), nil for v1 or a tag of another shape.
    static func tagBefore(tag: String) -> String? {
        guard let named = orderVersion(of: tag), named.version > 1 else { return nil }
        return ExpectedVersion.etag(of: named.order, version: named.version - 1)
    }

    /// The version tag of the order just before the write that saved it (`"o42-v7"` for v8).
    static func tagBefore(_ saved: SavedOrder) -> String? {
        guard saved.order.version > 1 else { return nil }
        return "\"o\(saved.order.id)-v\(saved.order.version - 1)\""
    }

    /// The send of the head ended with `outcome`.
    mutating func finished(_ outcome: Outcome, random: inout some RandomNumberGenerator) -> Finish {
        guard isSending else { return .none }
        switch outcome {
        case .applied(let saved):
            failures = 0
            var applied = actions.removeFirst()
            applied.state = .applied
            // The version this action moved the order from: its own If-Match, or (sent without one)
            // the one just before the version it made. A later action of the driver's that expects
            // it is moved on to the new version: their own change must not refuse their next one.
            // An answer without an ETag (a proxy that strips it) still names the new version: the
            // later action keeps a precondition (found by a review, 2026-12-04: it went out with
            // none, applied whatever changed meanwhile).
            if let expected = applied.ifMatch.map(Self.versionTag) ?? Self.tagBefore(saved) {
                moveOn(applied.orderID, from: expected,
                    to: saved.etag ?? ExpectedVersion.etag(of: saved.order.id, version: saved.order.version))
            }
            return .applied(applied, saved)
        case .appliedUnread(let etag):
            failures = 0
            var applied = actions.removeFirst()
            applied.state = .applied
            // The write made exactly one new version (SPEC §1: +1 on every change): later actions
            // that expect the one it moved from name that one. The answer's ETag, when it names it,
            // carries the server's check; else the bare version (matched by number). Sent without
            // If-Match, the version it moved from is the one before the ETag's.
            let before = applied.ifMatch.map(Self.versionTag) ?? etag.flatMap(Self.tagBefore(tag:))
            if let expected = before, let next = Self.tagAfter(expected) {
                moveOn(applied.orderID, from: expected, to: etag.map(Self.versionTag) == next ? etag! : next)
            }
            return .appliedUnread(applied)
        case .refused(let reason):
            failures = 0
            var refused = actions.removeFirst()
            refused.state = .refused(reason)
            return .refused(refused)
        case .retry(let countsAsServerFailure, let mayHaveApplied):
            if countsAsServerFailure { actions[0].serverFailures += 1 }
            if mayHaveApplied { actions[0].mayHaveApplied = true }
            let attempt = failures
            failures += 1
            // Only server failures and the age drop an action: a policy's `maxAttempts` (a preset
            // such as `.classic` has 3) must not turn minutes out of coverage into `gave_up` (found
            // by a review, 2026-12-04; PROTOCOL.md, "unreachable attempts only count toward the age").
            var retry = policy.retry
            retry.maxAttempts = nil
            guard actions[0].serverFailures < policy.maxServerFailures,
                let delay = retry.delay(forAttempt: attempt, random: &random)
            else {
                var refused = actions.removeFirst()
                refused.state = .refused(
                    ActionRefusal(
                        status: nil, code: "gave_up",
                        message: "the server kept failing; not retried again"
                            + (refused.mayHaveApplied ? " (an attempt may have been applied: check the order)" : "")))
                return .refused(refused)
            }
            actions[0].state = .waiting
            isBackingOff = true
            return .retry(actions[0], after: delay)
        }
    }

    /// The server's history rewound (`reset`): every waiting action is refused (`history_rewound`)
    /// and returned, oldest first. The one sending, if any, stays: it is out (and is marked).
    ///
    /// Also those without `If-Match`: a restore brings the id counter back too, so an order created
    /// since can carry the id of one the driver acted on, and the action would apply to an order
    /// they never saw (found by a review; before, only actions that name a version were refused).
    mutating func historyRewound() -> [QueuedAction] {
        if isSending { actions[0].sentBeforeReset = true }
        var dropped: [QueuedAction] = []
        actions.removeAll { action in
            guard action.state == .waiting else { return false }
            var refused = action
            refused.state = .refused(Self.rewound(action))
            dropped.append(refused)
            return true
        }
        return dropped
    }

    /// Why a queued action is dropped after a `reset`: the server cannot replay the
    /// device's history (restored, failed over, pruned, or too far behind), so the version the driver
    /// saw may now name other content, or the driver may not have seen the newest.
    static let rewound = ActionRefusal(
        status: nil, code: "history_rewound",
        message: "the server could not resume this device's history (its data was restored, or the device was"
            + " away too long): check the order and do this again")

    /// The same for an action a send of which may have been applied (no answer came): "do this
    /// again" would apply it twice (a document attached twice), so it says what an expiry of such
    /// an action says (`unconfirmed`; found by a review of the client, 2026-12-05).
    static let rewoundMayHaveApplied = ActionRefusal(
        status: nil, code: "unconfirmed",
        message: "sent, but not confirmed before the server could not resume this device's history: it may"
            + " have been applied; check the order")

    /// The refusal of `action` after a `reset`.
    static func rewound(_ action: QueuedAction) -> ActionRefusal {
        action.mayHaveApplied ? rewoundMayHaveApplied : rewound
    }

    /// The delay of the last ``Finish/retry(_:after:)`` has passed.
    mutating func backoffElapsed() { isBackingOff = false }

    /// The server looks reachable again (socket live, a fetch succeeded, the network came back): send now.
    /// Returns whether a backoff was cut short (its timer must be cancelled).
    mutating func wake() -> Bool {
        failures = 0
        defer { isBackingOff = false }
        return isBackingOff
    }

    /// The session stopped while the head was sending: it waits again (and is resent with the same
    /// key), marked as possibly applied (its answer will never be read) unless `refused`: its own
    /// send was answered 401, which applied nothing (it was later reported "may have been applied";
    /// found by a review, 2026-12-05).
    mutating func interrupted(refused: Bool = false) {
        if isSending {
            actions[0].state = .waiting
            if !refused { actions[0].mayHaveApplied = true }
        }
        isBackingOff = false
    }

    /// What a failed send means: retried (offline, 5xx, 401, 429, a key still in use) or refused for good.
    static func outcome(for error: WaybillClientError) -> Outcome {
        // Applied, only its answer is unreadable (its retries would replay the same answer).
        if error.isUnreadableSuccess { return .appliedUnread(etag: error.etag) }
        guard let status = error.status else {
            // No answer (offline, timeout, a lost response) or an unreadable one: same key, later.
            // Which of these left before the request reached the server cannot be told apart.
            return .retry(countsAsServerFailure: error == .badResponse, mayHaveApplied: true)
        }
        switch status {
        case 503:
            // The server or its store cannot be reached for now (a PostgreSQL restart or failover
            // answers 503 `store_unavailable` until it is back): like being offline, only the age
            // limit bounds it — a store outage of minutes must not drop what the driver did.
            return .retry(countsAsServerFailure: false)
        case 502, 504:
            // The same, but from a proxy whose node died or closed mid-request (or took too long):
            // the node may have committed it.
            return .retry(countsAsServerFailure: false, mayHaveApplied: true)
        case 500...:
            // An answer from the server, but not one that says nothing was written.
            return .retry(countsAsServerFailure: true, mayHaveApplied: true)
        case 300..<400:
            // Waybill never redirects: something between (a captive portal) answered, the server
            // never saw the action.
            return .retry(countsAsServerFailure: false)
        case 401, 408, 429:
            // 401: the app logs in again and a new session resumes the queue; the age limit bounds it.
            return .retry(countsAsServerFailure: false)
        case 409 where error.code == "idempotency_key_in_use":
            // The first attempt (whose answer we lost) is still running on the server: ask again later.
            return .retry(countsAsServerFailure: false, mayHaveApplied: true)
        default:
            return .refused(ActionRefusal(status: status, code: error.code ?? "http_\(status)", message: error.message))
        }
    }
}

/// When the offline queue retries and when it gives up (part of ``DriverSession/Configuration``).
public struct ActionQueuePolicy: Hashable, Sendable {
    /// Delays between attempts (exponential, with jitter). Default: 1 s doubling to 60 s. Its
    /// `maxAttempts` is not used: only the age and server-failure limits drop an action.
    public var retry: ReconnectPolicy
    /// An action not sent successfully within this time after the driver made it is dropped as `expired`.
    /// Default 24 h: the time the server is required to keep idempotency keys, so no retry can apply twice.
    public var maxAge: Duration
    /// An action the server answered with a failure (5xx, unreadable) this many times is dropped as
    /// `gave_up`. Default 10. Attempts that found the server unreachable do not count.
    public var maxServerFailures: Int

    /// A policy with the given fields; the defaults are the production values.
    public init(
        retry: ReconnectPolicy = ReconnectPolicy(base: .seconds(1), cap: .seconds(60), maxAttempts: nil, jitter: .full),
        maxAge: Duration = .seconds(24 * 3600),
        maxServerFailures: Int = 10
    ) {
        self.retry = retry
        self.maxAge = maxAge
        self.maxServerFailures = maxServerFailures
    }
}

extension Duration {
    /// The duration in (fractional) seconds.
    var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) / 1e18
    }
}
