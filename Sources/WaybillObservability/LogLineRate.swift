import Synchronization

/// At most one log line per `interval` for one kind of line that can come in floods, with how
/// many were left out since the last one written. The request that meets a store outage is the
/// case: a node answering 500 writes a second with 503 wrote an error line for each (about 5 600
/// in 10 s of a partition, docs/HARDENING.md), which only repeated what the access lines say and
/// pushed other lines out of the log writer's buffer.
public final class LogLineRate: Sendable {
    private let interval: Duration
    private let now: @Sendable () -> ContinuousClock.Instant
    private let state = Mutex<(last: ContinuousClock.Instant?, skipped: Int)>((nil, 0))

    public init(interval: Duration = .seconds(1), now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }) {
        self.interval = interval
        self.now = now
    }

    /// Whether to write the line now: `nil` to leave it out (it is counted), or how many were left
    /// out since the last one written (to say so in this one).
    public func admit() -> Int? {
        let now = self.now()
        return state.withLock { state -> Int? in
            if let last = state.last, now < last + interval {
                state.skipped += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.skipped
        }
    }
}
