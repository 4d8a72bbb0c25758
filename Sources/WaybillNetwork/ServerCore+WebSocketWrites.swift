import CWebSockets

/// Server WebSocket output: direct writes when nothing waits, packed writes when frames queue up.
///
/// Frames sent from a socket's own callback (a pong from `socketReceived`) are written at once. Frames
/// sent from posted work (`HTTPServer.execute`: fan-out of events) are queued while the inbox drains and
/// flushed per socket afterwards, so the events of one wake-up reach each socket in one `send()`.
///
/// lws's rule is "write in `WRITEABLE`", but on HTTP/1.1 (all Waybill serves) a write at any point on
/// the service thread is safe as long as lws holds no unsent bytes for that socket
/// (`lws_partial_buffered`); lws then buffers any tail the kernel does not take and holds `WRITEABLE`
/// back until it has drained. Asking for `WRITEABLE` first costs two `epoll_ctl`s and a loop
/// wake-up per frame, which was most of the cost of answering a ping.
extension ServerCore {
    /// Most bytes one `WRITEABLE` writes before yielding to other sockets.
    static let writeBudgetPerCallback = 256 << 10

    /// `SERVER_WRITEABLE`: writes the queue, then closes if a close is pending and the queue is empty.
    func webSocketWriteable(_ wsi: OpaquePointer, _ user: UnsafeMutableRawPointer?) -> Int32 {
        guard let connection = slotObject(user) as? WebSocketConnection, !connection.closeSent else { return 0 }
        writeStatistics.writeableCallbacks += 1
        guard writeQueued(connection, wsi) else { return -1 }
        // What lws still holds goes out before the close: closing with a tail in its buffer, lws
        // flushes the tail and then drops the connection without the close frame, so the peer saw
        // 1006 for the server's 1012 or 1013 (found by a review, 2026-12-07).
        if connection.hasQueued || connection.pingIsPending || (connection.pendingClose != nil && lws_partial_buffered(wsi) != 0) {
            lws_callback_on_writable(wsi)
            return 0
        }
        if let close = connection.pendingClose {
            connection.closeSent = true
            if connection.isReadingPaused {
                // Reading again, so that lws takes the peer's answer to the close frame. At once:
                // inside a callback lws otherwise applies the change when the callback returns 0,
                // and this one returns -1 (found by a review of lws 4.1.6: reading then resumed
                // only because lws happens to call `WRITEABLE` once more after the close frame).
                connection.isReadingPaused = false
                lws_rx_flow_control(
                    wsi,
                    Int32(LWS_RXFLOW_REASON_APPLIES_ENABLE | LWS_RXFLOW_REASON_USER_BOOL | LWS_RXFLOW_REASON_FLAG_PROCESS_NOW))
            }
            closeNow(wsi, code: close.code, reason: close.reason)
            return -1
        }
        return 0
    }

    /// Writes queued frames while lws holds nothing back: a lone frame from its own storage (no copy),
    /// two or more packed into one raw write. Returns `false` when lws reports a write error.
    func writeQueued(_ connection: WebSocketConnection, _ wsi: OpaquePointer) -> Bool {
        notePingEnd(connection)
        if connection.pingIsPending, lws_partial_buffered(wsi) == 0 {
            connection.pingIsPending = false
            writePing(connection)
        }
        var written = 0
        while let next = connection.nextFrameCount, lws_partial_buffered(wsi) == 0, written < Self.writeBudgetPerCallback {
            if connection.queuedFrameCount == 1 || !packer.canHold(payload: next) {
                guard let first = connection.dequeue() else { break }
                guard write(first, to: wsi) else { return false }
                written += first.count
                continue
            }
            packer.reset()
            _ = connection.packFront(into: packer)
            writeStatistics.frames += packer.frameCount
            writeStatistics.sends += 1
            guard lws_write(wsi, packer.bytes, packer.count, LWS_WRITE_HTTP) >= packer.count else { return false }
            written += packer.count
        }
        return true
    }

    /// One frame through lws's WebSocket framing (it fills the header into the storage's headroom).
    private func write(_ frame: OutboundFrame, to wsi: OpaquePointer) -> Bool {
        let kind = frame.isBinary ? LWS_WRITE_BINARY : LWS_WRITE_TEXT
        writeStatistics.frames += 1
        writeStatistics.sends += 1
        return lws_write(wsi, frame.storage.payload, frame.count, kind) >= frame.count
    }

    // MARK: SocketIO

    func send(_ frame: OutboundFrame, to id: SocketID) -> Bool {
        guard let connection = sockets[id] else { return false }
        return send(frame, on: connection)
    }

    /// Several frames for one socket, in order, with one look-up (the hub's fan-out of a batch).
    /// Stops at the first frame that is refused: the socket is then closing. Returns the frames queued.
    func send(_ frames: [OutboundFrame], to id: SocketID) -> Int {
        guard let connection = sockets[id] else { return 0 }
        var sent = 0
        for frame in frames {
            guard send(frame, on: connection) else { break }
            sent += 1
        }
        return sent
    }

    private func send(_ frame: OutboundFrame, on connection: WebSocketConnection) -> Bool {
        guard connection.isOpen else { return false }
        if !isDeferringWrites, !connection.hasQueued, !connection.peerIsClosing,
            lws_partial_buffered(connection.wsi) == 0
        {
            // Nothing is ahead of this frame: write it now (a pong leaves from the ping's own callback).
            guard write(frame, to: connection.wsi) else {
                connection.isBroken = true
                // This may not be the socket's own callback, so it cannot return -1: have lws kill it.
                lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                return false
            }
            return true
        }
        connection.enqueue(frame)
        if connection.queuedBytes > configuration.maxQueuedBytesPerSocket {
            connection.dropQueue()
            connection.wasSlowConsumer = true
            connection.requestClose(code: configuration.slowConsumerCloseCode, reason: "slow consumer")
            // A stuck peer may never be writable again: a shorter deadline than other closes'.
            closeFromWriteable(connection, within: 2)
            return false
        }
        if isDeferringWrites {
            if !connection.hasDeferredWrite {
                connection.hasDeferredWrite = true
                deferredWrites.append(connection)
            }
        } else {
            lws_callback_on_writable(connection.wsi)
        }
        return true
    }

    /// After the inbox drained: writes what each noted socket queued (packed when there are several),
    /// and leaves any rest to `WRITEABLE`. Service thread.
    func flushDeferredWrites() {
        guard !deferredWrites.isEmpty else { return }
        // Swapped, not copied: a copy would make `removeAll(keepingCapacity:)` allocate a new
        // buffer (8 KB at 1 000 sockets) on every flush.
        swap(&deferredWrites, &flushingWrites)
        defer { flushingWrites.removeAll(keepingCapacity: true) }
        for connection in flushingWrites {
            connection.hasDeferredWrite = false
            guard connection.isOpen, connection.hasQueued else { continue }
            let wsi = connection.wsi
            if connection.peerIsClosing || lws_partial_buffered(wsi) != 0 {
                lws_callback_on_writable(wsi)
            } else if !writeQueued(connection, wsi) {
                connection.isBroken = true
                connection.dropQueue()
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
            } else if connection.hasQueued || connection.pingIsPending {
                lws_callback_on_writable(wsi)
            }
        }
    }
}
