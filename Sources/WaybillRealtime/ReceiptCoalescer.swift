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
/// - at most `maxPending` orders wait (a hostile client cannot grow the hub's memory); receipts
///   for further orders are dropped until the next write (the device reports them again after
///   its next fetch).
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

    public init(interval: Duration = .seconds(1), maxPending: Int = 500) {
        self.interval = interval
        self.maxPending = maxPending
    }

    /// A `seen` frame's entries arrived at `now` (time elapsed on the hub's clock).
    public mutating func received(_ reports: [SeenReport], at now: Duration) -> Action {
        for report in reports where report.version > 0 {
            if let known = pending[report.orderID] {
                pending[report.orderID] = max(known, report.version)
            } else if pending.count < maxPending {
                pending[report.orderID] = report.version
            }
        }
        return next(at: now)
    }

    /// The wake-up asked for by `.wake` is due.
    public mutating func woke(at now: Duration) -> Action {
        isWakeScheduled = false
        return next(at: now)
    }

    /// The write asked for by `.write` has finished (committed or failed).
    public mutating func written(at now: Duration) -> Action {
        isWriting = false
        return next(at: now)
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

    /// How long until a write may begin: a second after the previous one began.
    private func delay(at now: Duration) -> Duration {
        guard let lastWriteStart else { return .zero }
        return max(.zero, lastWriteStart + interval - now)
    }

    private mutating func takePending() -> [SeenReport] {
        let reports = pending.map { SeenReport(orderID: $0.key, version: $0.value) }.sorted { $0.orderID < $1.orderID }
        pending = [:]
        return reports
    }
}
