public import WaybillDomain

/// One driver's `seen` receipts on their way to the store, as a value: at most one store write per
/// `interval` (SPEC §4: "at most one store write per socket per second"; here per driver, for all
/// of the driver's sockets together).
///
/// The hub owns one per driver with an open socket (and for a second after the last one closed),
/// on the network service thread, and feeds it what happened (a `seen` frame, its timer, a
/// finished write) with the time elapsed on its clock;
/// it performs what comes back. Nothing here touches a socket, a thread or the store, so the rules
/// are tested with plain values and made-up times (Tests/WaybillRealtimeTests):
/// - receipts for one order merge, keeping the highest version (a device that showed 5 then 6
///   needs only 6 written);
/// - the first receipt after a quiet second is written at once; later ones wait until a second
///   after the last write began, and go out together in one write;
/// - never two writes of one driver at a time: the next waits for the previous one to finish;
/// - at most `maxPending` orders wait (a hostile client cannot grow the hub's memory), enough for
///   what a device reports when it connects: its whole list, up to 1 000 rows (two halves of 500),
///   and its opened orders; at 500 the newest orders of a long list were dropped (a review); receipts
///   for further orders are dropped until the next write (the device reports them again only for
///   a version it has not reported on that socket: a new version, or after a reconnect);
/// - a write that failed (the store down for a moment, a failover) goes back into the queue and is
///   tried again after a backoff that doubles from `interval` up to 30 s, `maxRetries` times, and
///   for as long as the driver has a socket open here (`keepTrying`): the device does not send a
///   version twice on one socket, so a receipt dropped here stayed "not seen" on the panel until
///   the order's next version (found by a review, 2026-12-04), and after a store outage of over
///   90 s until the device reconnected (a review, 2026-12-05);
/// - a history rewind (a restore, a failover that lost commits) drops what waits, and what a write
///   in flight carried if it fails: those versions are the old history's, and the device reports
///   the new one's after its `reset` (kept, the highest version hid the restored one: a review).
public struct ReceiptCoalescer: Sendable {
    /// What the hub does next for this socket.
    public enum Action: Equatable, Sendable {
        case none
        /// Write these receipts now (one transaction), then call `written(at:)`.
        case write([SeenReport])
        /// Call `woke(at:)` after this long.
        case wake(after: Duration)
    }

    public let interval: Duration
    public let maxPending: Int
    /// Order → highest version reported and not yet handed to a write.
    public private(set) var pending: [OrderID: Int] = [:]
    private var lastWriteStart: Duration?
    private var isWriting = false
    private var isWakeScheduled = false
    /// Failed writes in a row (0 after one that committed).
    public private(set) var failures = 0
    /// The write in flight began before a history rewind: if it fails, its receipts are dropped.
    private var inFlightIsStale = false
    /// How many times in a row a failed write is tried again before its receipts are dropped.
    public let maxRetries: Int
    static let longestBackoff: Duration = .seconds(30)

    /// A driver's list holds up to 1 000 rows (the client's two halves of 500), and a device
    /// reports them all when it connects, with its opened orders.
    public static let defaultMaxPending = 1_200

    public init(interval: Duration = .seconds(1), maxPending: Int = defaultMaxPending, maxRetries: Int = 6) {
        self.interval = interval
        self.maxPending = maxPending
        self.maxRetries = maxRetries
    }

    /// A `seen` frame's entries arrived at `now` (time elapsed on the hub's clock).
    public mutating func received(_ reports: [SeenReport], at now: Duration) -> Action {
        merge(reports)
        return next(at: now)
    }

    private mutating func merge(_ reports: [SeenReport]) {
        for report in reports where report.version > 0 {
            if let known = pending[report.orderID] {
                pending[report.orderID] = max(known, report.version)
            } else if pending.count < maxPending {
                pending[report.orderID] = report.version
            }
        }
    }

    /// The wake-up asked for by `.wake` is due.
    public mutating func woke(at now: Duration) -> Action {
        isWakeScheduled = false
        return next(at: now)
    }

    /// The write asked for by `.write` has finished: committed (`failed` empty), or failed with
    /// the receipts it carried, which wait for the next write (up to `maxRetries` times in a row,
    /// or for as long as `keepTrying`: the driver still has a socket here, whose device will not
    /// report those versions again).
    public mutating func written(at now: Duration, failed: [SeenReport] = [], keepTrying: Bool = false) -> Action {
        isWriting = false
        let stale = inFlightIsStale
        inFlightIsStale = false
        if failed.isEmpty {
            failures = 0
        } else if stale {
            // The old history's versions: dropped (the device reports the new ones after `reset`).
        } else if failures < maxRetries || keepTrying {
            failures = min(failures + 1, maxRetries)
            merge(failed)
        } else {
            failures = 0  // given up: these are dropped, what comes next starts afresh
        }
        return next(at: now)
    }

    /// History rewound under the store: what waits names versions of the old history.
    public mutating func historyRewound() {
        pending = [:]
        if isWriting { inFlightIsStale = true }
    }

    /// Nothing waits, is being written or is scheduled.
    public var isIdle: Bool { pending.isEmpty && !isWriting && !isWakeScheduled }

    /// Whether a write began less than `interval` before `now` (the next one would have to wait).
    public func isWithinInterval(at now: Duration) -> Bool { delay(at: now) > .zero }

    private mutating func next(at now: Duration) -> Action {
        guard !pending.isEmpty, !isWriting else { return .none }
        let wait = delay(at: now)
        if wait <= .zero {
            isWriting = true
            lastWriteStart = now
            return .write(takePending())
        }
        guard !isWakeScheduled else { return .none }
        isWakeScheduled = true
        return .wake(after: wait)
    }

    /// How long until a write may begin: a second after the previous one began, or after failed
    /// ones the backoff (`interval` doubled per failure, at most `longestBackoff`).
    private func delay(at now: Duration) -> Duration {
        guard let lastWriteStart else { return .zero }
        return max(.zero, lastWriteStart + gap - now)
    }

    /// Between two write starts: `interval`, doubled per failed write in a row up to
    /// `longestBackoff` (never less than `interval`).
    private var gap: Duration {
        var gap = interval
        for _ in 0..<failures where gap < Self.longestBackoff { gap = gap * 2 }
        return max(interval, min(gap, Self.longestBackoff))
    }

    private mutating func takePending() -> [SeenReport] {
        let reports = pending.map { SeenReport(orderID: $0.key, version: $0.value) }.sorted { $0.orderID < $1.orderID }
        pending = [:]
        return reports
    }
}
