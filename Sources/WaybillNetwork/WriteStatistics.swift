/// Counters of the server's WebSocket output, kept on the service thread (tests and benchmarks use
/// them to check that frames are packed, replies skip the `WRITEABLE` round, and small HTTP answers
/// leave in one write).
struct WriteStatistics: Sendable, Equatable {
    /// Data frames handed to lws.
    var frames = 0
    /// `lws_write` calls for data frames (one per lone frame, one per pack).
    var sends = 0
    /// `SERVER_WRITEABLE` callbacks for WebSockets.
    var writeableCallbacks = 0
    /// Protocol pings sent by the heartbeat.
    var pings = 0
    /// HTTP responses finished, and the `lws_write` calls they took (one for a small answer).
    var httpResponses = 0
    var httpWrites = 0
    /// Answers whose head the server wrote itself (`HTTPSession.writeOKHead`).
    var ownHeads = 0
    /// Kept-alive connections closed for idling (`KeepAliveWheel`).
    var keepAliveCloses = 0
    /// Connections taken over by the wheel only after lws finished sending their last answer.
    var keepAliveAfterSending = 0
    /// Passes of the service loop (libev only: the prepare watcher's runs; 0 with `poll`).
    var loopPasses = 0
    /// Runs of the service thread's timers (the 100 ms heartbeat, the loop's own 50 ms one): each
    /// can make a loop pass that no request made.
    var timerTicks = 0
}
