/// When the subscriber thread pings, and when silence means the connection is gone.
///
/// A partitioned or frozen Redis sends nothing, and a subscribed socket is otherwise silent on an idle
/// channel: without a heartbeat the loop was still waiting, unaware, after 6 s; TCP keepalive in
/// hiredis 0.14 is 15 s idle + 3 × 5 s (notes §7). So: PING every `interval`; anything read
/// (a pong, a message, or bytes of one still arriving) proves the connection; nothing read for
/// `timeout` while a PING has waited
/// at least `interval` for its answer → reconnect. That gave up after 3.0 s in the notes' partition
/// test, and after 2 s here when Redis freezes right after a reply.
///
/// Silence counts only while a PING is out: a stall of our own process (a slow handler, the VM
/// paused) longer than `timeout` is not Redis's silence, since nothing was asked meanwhile. After
/// such a stall the heartbeat pings and waits for that answer; judging the stall alone dropped and
/// renewed a healthy subscription (found in review, test `aStallOfTheSubscriber…`).
struct RedisHeartbeat: Sendable {
    enum Action: Equatable { case none, ping, reconnect }

    var interval: Duration = .seconds(1)
    var timeout: Duration = .seconds(2)
    private var lastHeard: ContinuousClock.Instant
    private var lastPing: ContinuousClock.Instant
    /// When the first PING since the last reply went out; nil when every PING has been answered.
    private var unansweredSince: ContinuousClock.Instant?

    /// Starts counting at `now` (just subscribed: the SUBSCRIBE reply was the last thing heard).
    init(now: ContinuousClock.Instant, interval: Duration = .seconds(1), timeout: Duration = .seconds(2)) {
        self.interval = interval
        self.timeout = timeout
        lastHeard = now
        lastPing = now
    }

    /// Bytes arrived: a reply of any kind, or part of one (noted before it is handled: a slow
    /// handler's time counts as silence, which the rule above forgives by pinging first).
    mutating func heard(at now: ContinuousClock.Instant) {
        lastHeard = now
        unansweredSince = nil
    }

    /// What to do at `now`: reconnect after `timeout` of silence with a PING out for at least
    /// `interval`; else ping every `interval`. A silence nobody asked about (no PING since the last
    /// reply, so the last PING is older still) is therefore met with a PING at once, as long as
    /// `timeout` ≥ `interval` (1 s and 2 s, `RedisSettings`).
    mutating func check(at now: ContinuousClock.Instant) -> Action {
        if now - lastHeard >= timeout, let asked = unansweredSince, now - asked >= interval { return .reconnect }
        if now - lastPing >= interval {
            lastPing = now
            if unansweredSince == nil { unansweredSince = now }
            return .ping
        }
        return .none
    }
}
