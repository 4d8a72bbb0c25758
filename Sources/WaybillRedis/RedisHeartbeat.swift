/// When the subscriber thread pings, and when silence means the connection is gone.
///
/// A partitioned or frozen Redis sends nothing, and a subscribed socket is otherwise silent on an idle
/// channel: without a heartbeat the loop was still waiting, unaware, after 6 s; TCP keepalive in
/// hiredis 0.14 is 15 s idle + 3 × 5 s (notes §7). So: PING every `interval`; anything read
/// (a pong or a message) proves the connection; nothing read for `timeout` → reconnect. That
/// gave up after 3.0 s in the notes' partition test.
struct RedisHeartbeat: Sendable {
    enum Action: Equatable { case none, ping, reconnect }

    var interval: Duration = .seconds(1)
    var timeout: Duration = .seconds(2)
    private var lastHeard: ContinuousClock.Instant
    private var lastPing: ContinuousClock.Instant

    /// Starts counting at `now` (just subscribed: the SUBSCRIBE reply was the last thing heard).
    init(now: ContinuousClock.Instant, interval: Duration = .seconds(1), timeout: Duration = .seconds(2)) {
        self.interval = interval
        self.timeout = timeout
        lastHeard = now
        lastPing = now
    }

    /// A reply of any kind arrived.
    mutating func heard(at now: ContinuousClock.Instant) { lastHeard = now }

    /// What to do at `now`: reconnect after `timeout` of silence, else ping every `interval`.
    mutating func check(at now: ContinuousClock.Instant) -> Action {
        if now - lastHeard >= timeout { return .reconnect }
        if now - lastPing >= interval {
            lastPing = now
            return .ping
        }
        return .none
    }
}
