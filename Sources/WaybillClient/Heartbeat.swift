/// Notices a dead socket that never reported its death (a phone that lost coverage: "half-open").
///
/// Every `interval` the session sends `{"type":"ping"}`; if nothing at all arrived by the next interval
/// (not the `pong`, not an event) the socket is declared dead and the session reconnects with resume.
/// Without it a silent socket would look live forever and only the 120 s poll would notice changes.
struct Heartbeat: Sendable {
    enum Action: Hashable, Sendable {
        /// Send `{"type":"ping"}` and wait another interval.
        case sendPing
        /// Nothing came back for a whole interval: treat the socket as dropped.
        case declareDead
    }

    static let ping = #"{"type":"ping"}"#

    let interval: Duration
    /// A ping went out and nothing has come back since.
    private(set) var isAwaitingReply = false

    init(interval: Duration) { self.interval = interval }

    /// Any frame proves the socket alive.
    mutating func frameReceived() { isAwaitingReply = false }

    /// Another interval has passed.
    mutating func intervalElapsed() -> Action {
        if isAwaitingReply { return .declareDead }
        isAwaitingReply = true
        return .sendPing
    }
}
