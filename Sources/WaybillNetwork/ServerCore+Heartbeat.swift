import CWebSockets

/// The server's WebSocket heartbeat: a 100 ms timer runs `HeartbeatWheel` and sends protocol pings
/// (with a payload, because lws does not report empty pongs) or drops silent peers.
extension ServerCore {
    /// Wheel ticks per second.
    static let heartbeatTicksPerSecond = 10

    /// The ping interval in heartbeat ticks (at least one).
    static func heartbeatTicks(_ interval: Duration) -> Int {
        max(1, Int((interval / .milliseconds(1000 / heartbeatTicksPerSecond)).rounded()))
    }

    /// lws takes whole seconds: rounded up, at least 1 (0 would turn the timer off).
    static func wholeSeconds(_ duration: Duration) -> Int64 {
        max(1, Int64((duration / .seconds(1)).rounded(.up)))
    }

    /// Starts the tick. Service thread, right after the context exists.
    func scheduleHeartbeat(_ context: OpaquePointer) {
        heartbeatTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        let period = lws_usec_t(1_000_000 / Self.heartbeatTicksPerSecond)
        lws_sul_schedule(context, 0, lwsx_timer_sul(heartbeatTimer), heartbeatTick, period)
    }

    /// Stops the tick before the context (and the timer's list) goes away.
    func cancelHeartbeat() {
        lws_sul_cancel(lwsx_timer_sul(heartbeatTimer))
    }

    fileprivate func heartbeatTicked() {
        if let context = loop.context { scheduleHeartbeat(context) }
        for action in heartbeat.tick(isStillReading: peerIsStillReading) {
            switch action {
            case .ping(let id):
                if let connection = sockets[id], connection.isOpen {
                    connection.pongsSincePing = 0
                    noteTurn(connection, sendProgress(of: connection))
                    sendPing(connection)
                }
            case .drop(let id):
                guard let connection = sockets[id], !connection.isBroken else { continue }
                // Like lws's own idle hang-up: no close frame (the peer is not listening), so the
                // delegate sees `code: nil`.
                connection.isBroken = true
                connection.dropQueue()
                lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            }
        }
    }

    /// For a socket that owes a pong at its turn: whether its peer is still reading what was sent
    /// before the ping. That is: the peer acknowledged more output since the socket's last turn, and
    /// output was still on its way (queued here, held by lws, or not yet acknowledged in the kernel)
    /// at that turn or is now. The first holds the ping back while a backlog drains; the second gives
    /// a peer whose kernel took the ping only in the last interval that interval to answer it. TCP
    /// acknowledges only what fits in the peer's receive window, so a peer whose application reads
    /// nothing stops making progress once its buffer is full, and a vanished one at once.
    func peerIsStillReading(_ id: SocketID) -> Bool {
        guard let connection = sockets[id], connection.isOpen, let progress = sendProgress(of: connection) else {
            return false
        }
        let acked = connection.ackedAtLastTurn, wasWaiting = connection.outputWaitedAtLastTurn
        let isWaiting = noteTurn(connection, progress)
        return progress.acked > acked && (wasWaiting || isWaiting)
    }

    /// Remembers what the socket's output looked like at this turn; returns whether some was still
    /// on its way.
    @discardableResult
    func noteTurn(_ connection: WebSocketConnection, _ progress: (acked: UInt64, isOutstanding: Bool)?) -> Bool {
        let isWaiting =
            (progress?.isOutstanding ?? false) || connection.hasQueued || connection.pingIsPending
            || lws_partial_buffered(connection.wsi) != 0
        connection.ackedAtLastTurn = progress?.acked ?? 0
        connection.outputWaitedAtLastTurn = isWaiting
        return isWaiting
    }

    /// What the kernel reports of the socket's output; `nil` when it cannot say.
    func sendProgress(of connection: WebSocketConnection) -> (acked: UInt64, isOutstanding: Bool)? {
        var acked: UInt64 = 0
        var outstanding: Int32 = 0
        guard lwsx_send_progress(connection.wsi, &acked, &outstanding) == 0 else { return nil }
        return (acked, outstanding != 0)
    }

    /// Writes a ping now if nothing is waiting ahead of it, else right before the queue in `WRITEABLE`.
    func sendPing(_ connection: WebSocketConnection) {
        if !connection.hasQueued, !connection.peerIsClosing, lws_partial_buffered(connection.wsi) == 0 {
            writePing(connection.wsi)
        } else {
            connection.pingIsPending = true
            lws_callback_on_writable(connection.wsi)
        }
    }

    func writePing(_ wsi: OpaquePointer) {
        writeStatistics.pings += 1
        _ = lws_write(wsi, pingPayload, Self.pingPayloadBytes.count, LWS_WRITE_PING)
    }

    /// The ping's payload: any bytes do; "wb" names the sender in packet captures.
    static let pingPayloadBytes: [UInt8] = Array("wb".utf8)
}

/// The heartbeat timer's C callback.
func heartbeatTick(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwsx_timer_owner(sul) else { return }
    Unmanaged<ServerCore>.fromOpaque(owner).takeUnretainedValue().heartbeatTicked()
}
