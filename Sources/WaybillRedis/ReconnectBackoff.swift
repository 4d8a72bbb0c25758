/// Delays between reconnect attempts: 100 ms, doubling, at most 2 s; back to the start after a success.
///
/// Reconnecting to a down Redis is refused in 0.1 ms (notes §7), so the delay is not there to save
/// that cost: it keeps a down or blackholed server from turning into a busy loop of connects and
/// log lines, while a restart is still noticed within 2 s.
struct ReconnectBackoff: Sendable, Equatable {
    var initial: Duration = .milliseconds(100)
    var maximum: Duration = .seconds(2)
    private(set) var failures = 0

    /// The delay before the next attempt, after one more failure.
    mutating func nextDelay() -> Duration {
        let exponent = min(failures, 16)
        failures += 1
        let delay = initial * (1 << exponent)
        return min(delay, maximum)
    }

    /// A connection worked: the next failure waits `initial` again.
    mutating func reset() { failures = 0 }
}
