/// Where the session's live connection stands, for the app to show ("Live", "Reconnecting in 4 s", "Offline").
public enum ConnectionState: Hashable, Sendable {
    /// Opening the WebSocket (`attempt` 0 is the first try since the socket was last live).
    case connecting(attempt: Int)
    /// Receiving events; the lists are current within milliseconds.
    case live
    /// The socket dropped; the session retries after `delay` (attempt `attempt`, 0-based).
    case backingOff(attempt: Int, delay: Duration)
    /// The reconnect policy gave up; lists are kept current by polling until the app calls
    /// ``DriverSession/appDidBecomeActive()`` or ``DriverSession/networkDidBecomeAvailable()``.
    case pollingOnly
    /// Not connecting, for the given reason. Nothing runs then, after a 4001/4003 as after
    /// ``DriverSession/stop()``: no poll, no fetch, no queued action is sent (the queue is kept for the
    /// next session, e.g. after the driver logs in again).
    case stopped(StopReason)

    /// Whether events arrive right now.
    public var isLive: Bool { self == .live }
}

/// Why a session is not connecting.
public enum StopReason: Hashable, Sendable {
    /// ``DriverSession/start()`` has not been called yet.
    case notStarted
    /// The app called ``DriverSession/stop()``.
    case stoppedByApp
    /// The server refused the credentials (close code 4001, or 401 from the ticket endpoint): log in again.
    case notAuthenticated
    /// The user may not use the live feed (close code 4003, e.g. no company).
    case notAllowed
}
