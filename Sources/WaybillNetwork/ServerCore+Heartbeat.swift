import CWebSockets

/// The server's WebSocket heartbeat: a 100 ms timer runs `HeartbeatWheel` and sends protocol pings
/// (with a payload, because lws does not report empty pongs) or drops silent peers.
extension ServerCore {
    /// Wheel ticks per second.
    static let heartbeatTicksPerSecond = 10

    /// `interval` in heartbeat ticks (at least one): the ping interval to the nearest tick, the
    /// keep-alive timeout rounded up (never closed before it).
    static func heartbeatTicks(_ interval: Duration, rounding rule: FloatingPointRoundingRule = .toNearestOrAwayFromZero) -> Int {
        max(1, Int((interval / .milliseconds(1000 / heartbeatTicksPerSecond)).rounded(rule)))
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
        writeStatistics.timerTicks &+= 1
        if let context = loop.context { scheduleHeartbeat(context) }
        keepAliveTicked()
        for action in heartbeat.tick(mayWait: pingMayNotHaveArrived) {
            switch action {
            case .ping(let id):
                if let connection = sockets[id], connection.isOpen {
                    connection.pongsSincePing = 0
                    connection.ackedAtLastTurn = sendProgress(of: connection)?.acked ?? 0
                    connection.pingEnd = nil
                    connection.pingEndIsPending = false
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

    /// For a socket that owes a pong at its turn: whether the ping may simply not have reached its
    /// peer yet, so the socket waits another interval (`HeartbeatWheel` bounds how many).
    ///
    /// The ping waits behind what lws and the kernel already hold for the socket, so on a slow link
    /// behind a long replay it arrives late. The kernel tells where the ping ends in the stream
    /// (`pingEnd`, noted when it was written) and how much of the stream the peer has acknowledged.
    /// While the ping is not yet acknowledged the socket waits if the peer acknowledged more since its
    /// last turn; TCP acknowledges only what fits in the peer's receive window, so a peer whose
    /// application reads nothing stops there, and a vanished one at once. A ping acknowledged since
    /// the last turn gets that one interval more to be answered. Frames sent after the ping count for
    /// nothing, and a ping without a backlog ahead of it (`lateBacklogBytes`) gets no extra time: a
    /// hung peer goes as before.
    func pingMayNotHaveArrived(_ id: SocketID) -> Bool {
        guard let connection = sockets[id], connection.isOpen, let now = sendProgress(of: connection) else {
            return false
        }
        let ackedBefore = connection.ackedAtLastTurn
        connection.ackedAtLastTurn = now.acked
        return Self.pingMayNotHaveArrived(
            end: connection.pingEnd, hadBacklog: connection.pingHadBacklog, ackedBefore: ackedBefore, ackedNow: now.acked)
    }

    /// The rule of `pingMayNotHaveArrived(_:)` on plain numbers: `end` is where the ping ends in the
    /// stream (`nil`: not all of it in the kernel yet), `ackedBefore` and `ackedNow` the bytes the
    /// peer had acknowledged at the last turn and now.
    static func pingMayNotHaveArrived(end: UInt64?, hadBacklog: Bool, ackedBefore: UInt64, ackedNow: UInt64) -> Bool {
        guard let end else { return ackedNow > ackedBefore }  // behind frames queued here, or its tail held by lws
        guard hadBacklog else { return false }
        if ackedNow < end { return ackedNow > ackedBefore }  // on its way: waits while the peer reads
        return ackedBefore < end  // acknowledged since the last turn: one interval to answer
    }

    /// Whether the output not yet acknowledged when a ping was written (the ping's own bytes
    /// included) is a backlog the ping may wait behind for long (`lateBacklogBytes`).
    static func isBacklog(written: UInt64, acked: UInt64) -> Bool {
        written >= acked && written - acked >= lateBacklogBytes
    }

    /// What the kernel reports of the socket's output; `nil` when it cannot say.
    func sendProgress(of connection: WebSocketConnection) -> (acked: UInt64, written: UInt64)? {
        var acked: UInt64 = 0
        var written: UInt64 = 0
        guard lwsx_send_progress(connection.wsi, &acked, &written) == 0 else { return nil }
        return (acked, written)
    }

    /// Writes a ping now if nothing is waiting ahead of it, else right before the queue in `WRITEABLE`.
    func sendPing(_ connection: WebSocketConnection) {
        if !connection.hasQueued, !connection.peerIsClosing, lws_partial_buffered(connection.wsi) == 0 {
            writePing(connection)
        } else {
            connection.pingIsPending = true
            lws_callback_on_writable(connection.wsi)
        }
    }

    /// Writes the ping and notes where it ends in the socket's stream (`pingMayNotHaveArrived`), and
    /// whether a backlog was on its way ahead of it.
    func writePing(_ connection: WebSocketConnection) {
        writeStatistics.pings += 1
        _ = lws_write(connection.wsi, pingPayload, Self.pingPayloadBytes.count, LWS_WRITE_PING)
        if lws_partial_buffered(connection.wsi) != 0 {
            // The kernel is full and lws holds the ping's tail. Nothing more is written to the
            // socket until lws has sent it, so its end is the count at the next `WRITEABLE`
            // (`notePingEnd`), not at the next turn, when frames sent since would count too.
            connection.pingEndIsPending = true
            connection.pingHadBacklog = true
            lws_callback_on_writable(connection.wsi)
            return
        }
        guard let after = sendProgress(of: connection) else { return }
        connection.pingEnd = after.written
        // A backlog, not the last frame or two awaiting a delayed acknowledgement (about 40 ms even
        // on loopback): a hung app on a live feed must not earn the extra interval (found by a review).
        connection.pingHadBacklog = Self.isBacklog(written: after.written, acked: after.acked)
    }

    /// Records where a ping whose tail lws held ends, once lws has sent it. Called before anything
    /// else is written to the socket.
    func notePingEnd(_ connection: WebSocketConnection) {
        guard connection.pingEndIsPending, lws_partial_buffered(connection.wsi) == 0 else { return }
        connection.pingEndIsPending = false
        connection.pingEnd = sendProgress(of: connection)?.written
    }

    /// Output ahead of a ping, not yet acknowledged, from which the ping may arrive late enough to
    /// need another interval once it is acknowledged (`pingMayNotHaveArrived`).
    static let lateBacklogBytes: UInt64 = 64 << 10

    /// The ping's payload: any bytes do; "wb" names the sender in packet captures.
    static let pingPayloadBytes: [UInt8] = Array("wb".utf8)
}

/// The heartbeat timer's C callback.
func heartbeatTick(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwsx_timer_owner(sul) else { return }
    Unmanaged<ServerCore>.fromOpaque(owner).takeUnretainedValue().heartbeatTicked()
}
