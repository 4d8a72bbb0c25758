import CWebSockets
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The listening socket (`ListeningSocket`), watched by lws as a raw file, and the connections
/// accepted from it. Service thread.
extension ServerCore {
    /// Connections accepted in one wake-up at most: a reconnect storm is taken in slices, with the
    /// open sockets served between them (the listener stays readable, so the loop comes back).
    static let acceptsPerPass = 64

    /// Hands the listening socket to lws, which watches it and closes it with its wsi. Returns
    /// false (the socket closed) if lws would not take it.
    func watch(_ listener: ListeningSocket, in context: OpaquePointer) -> Bool {
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = listener.descriptor
        guard let vhost = lws_get_vhost_by_name(context, "default"),
            let wsi = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, nil, nil)
        else {
            Glibc.close(listener.descriptor)
            return false
        }
        self.vhost = vhost
        listenerWsi = wsi
        spare = SpareDescriptor()
        boundPort.store(listener.port, ordering: .sequentiallyConsistent)
        return true
    }

    /// `LWS_CALLBACK_RAW_RX_FILE` on the listener: accepts what is queued, up to `acceptsPerPass`,
    /// and gives each connection to lws as an HTTP connection (what lws's own listener does, with
    /// its socket options: `TCP_NODELAY`, non-blocking, close-on-exec). Returns -1 (lws closes the
    /// listener) once shutdown has begun.
    func acceptConnections() -> Int32 {
        guard !isShuttingDown else { return -1 }
        acceptQueued(upTo: Self.acceptsPerPass)
        return 0
    }

    /// Accepts up to `limit` queued connections (see `acceptConnections`).
    private func acceptQueued(upTo limit: Int) {
        guard let vhost, let listenerWsi else { return }
        let listener = lws_get_socket_fd(listenerWsi)
        let type = lws_adoption_type(rawValue: LWS_ADOPT_SOCKET.rawValue | LWS_ADOPT_HTTP.rawValue)
        for _ in 0..<limit {
            let fd = lwsx_accept(listener)
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO:
                    continue  // that one is gone; the next may be fine
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: drop the oldest queued connection rather than spin on it.
                    if spare?.shedOne(from: listener) == true { continue }
                    // Nothing shed: the queue is empty now (Linux fails with EMFILE before it looks
                    // at the queue), or the spare could not be freed (the system's table full, the
                    // spare taken meanwhile). Either way stop watching the listener for a moment
                    // rather than wake on it at once, again.
                    pauseAccepting()
                    return
                default:
                    return  // EAGAIN: the queue is empty
                }
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var descriptor = lws_sock_file_fd_type()
            descriptor.sockfd = fd
            // On failure (lws's descriptor table full) lws has closed the socket itself.
            if let wsi = lws_adopt_descriptor_vhost(vhost, type, descriptor, nil, nil) {
                connections[wsi] = .now
            }
        }
    }

    /// Stops `RAW_RX_FILE` for the listener for `acceptPause`; the connections wait in the queue.
    private func pauseAccepting() {
        guard let listenerWsi, let context = loop.context else { return }
        lws_rx_flow_control(listenerWsi, 0)  // applied when this callback returns
        acceptTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        lws_sul_schedule(context, 0, lwsx_timer_sul(acceptTimer), acceptResumeTick, Self.acceptPauseMicroseconds)
    }

    /// How long a connection new at shutdown (accepted within this long before it, or taken from
    /// the listener's queue) has to send its request before it is closed as idle: a request on
    /// its way is then answered (or refused with 503), not reset with its connection.
    static let newConnectionGrace: Duration = .seconds(1)

    /// How long accepting pauses when the spare descriptor shed nothing.
    static let acceptPauseMicroseconds: lws_usec_t = 100_000

    func resumeAccepting() {
        guard let listenerWsi else { return }
        lws_rx_flow_control(listenerWsi, 1)
    }

    /// Shutdown's first step: no new connection from here on. Connects are refused by the kernel,
    /// so a proxy tries the next node (for a write too: nothing was sent). Connections already open
    /// are answered and closed (`ServerCore.answersLateRequests`, `closeIdleConnectionsIfDue`).
    func stopListening() {
        guard let listenerWsi else { return }
        // What the kernel already queued first: it completed those handshakes, and a client (nginx)
        // may have sent its request; closing the listener would reset them, a write answered 502
        // and never resent (found by a review). Taken in, each is answered, or refused with 503:
        // with no request in hand yet, they get `newConnectionGrace` to send it before they are
        // closed as idle, as do connections accepted just before. At most a listen backlog's
        // worth: a client that reconnects as fast as it is taken in must not hold the shutdown.
        // Left: a handshake that completes in the microseconds between the last accept and the
        // close is reset. (Tried: a drop-everything BPF filter on the listener first, so no
        // handshake could complete; connections then hung or were reset in the tests.)
        acceptQueued(upTo: Int(SOMAXCONN))
        let now = ContinuousClock.now
        let hasNew = connections.contains { now - $0.value < Self.newConnectionGrace && isIdleHTTPConnection($0.key) }
        if hasNew { idleCloseDeadline = max(idleCloseDeadline, now + Self.newConnectionGrace) }
        lws_sul_cancel(lwsx_timer_sul(acceptTimer))
        // Synchronous: nothing more is accepted in this pass. Never inside the listener's own callback.
        lws_set_timeout(listenerWsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
    }

    /// Closes the kept-alive connections that carry no request (past `idleConnectionDrain`).
    func closeIdleConnections() {
        for wsi in connections.keys where isIdleHTTPConnection(wsi) {
            // Asynchronous: the set is being walked, and lws may be inside a callback of this pass.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    /// Whether an accepted connection is open with no request in hand (shutdown waits for these
    /// only up to `idleConnectionDrain`).
    var hasIdleConnection: Bool { connections.keys.contains { isIdleHTTPConnection($0) } }

    /// An accepted connection that is neither a WebSocket nor in the middle of a request: lws
    /// empties its session slot between keep-alive transactions.
    func isIdleHTTPConnection(_ wsi: OpaquePointer) -> Bool {
        slotObject(lws_wsi_user(wsi)) == nil
    }

    /// `LWS_CALLBACK_WSI_DESTROY`: forgets a connection (or the listener) as lws frees it.
    func forgetConnection(_ wsi: OpaquePointer) {
        if wsi == listenerWsi {
            listenerWsi = nil
        } else {
            connections[wsi] = nil
            connectionIsBusy(wsi)
        }
    }

    /// Before the context goes: the spare descriptor is the only one lws does not close.
    func releaseSpareDescriptor() {
        lws_sul_cancel(lwsx_timer_sul(acceptTimer))
        spare?.release()
        spare = nil
    }
}

/// The end of an accept pause (a C callback, so a top-level `func`).
func acceptResumeTick(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwsx_timer_owner(sul) else { return }
    Unmanaged<ServerCore>.fromOpaque(owner).takeUnretainedValue().resumeAccepting()
}
