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
        listenerDescriptor = listener.descriptor
        spare = SpareDescriptor()
        boundPort.store(listener.port, ordering: .sequentiallyConsistent)
        return true
    }

    /// `LWS_CALLBACK_RAW_RX_FILE` on the listener: accepts what is queued, up to `acceptsPerPass`,
    /// and gives each connection to lws as an HTTP connection (what lws's own listener does, with
    /// its socket options: `TCP_NODELAY`, non-blocking, close-on-exec). Returns -1 (lws closes the
    /// listener) once shutdown has begun.
    func acceptConnections() -> Int32 {
        guard !isShuttingDown, let vhost else { return -1 }
        let type = lws_adoption_type(rawValue: LWS_ADOPT_SOCKET.rawValue | LWS_ADOPT_HTTP.rawValue)
        for _ in 0..<Self.acceptsPerPass {
            let fd = lwsx_accept(listenerDescriptor)
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO:
                    continue  // that one is gone; the next may be fine
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Out of descriptors: drop the oldest queued connection rather than spin on it.
                    acceptFailures += 1
                    if spare?.shedOne(from: listenerDescriptor) == true { continue }
                    return 0
                default:
                    return 0  // EAGAIN: the queue is empty
                }
            }
            var one: Int32 = 1
            _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var descriptor = lws_sock_file_fd_type()
            descriptor.sockfd = fd
            // On failure (lws's descriptor table full) lws has closed the socket itself.
            if let wsi = lws_adopt_descriptor_vhost(vhost, type, descriptor, nil, nil) {
                connections.insert(wsi)
            } else {
                acceptFailures += 1
            }
        }
        return 0
    }

    /// Shutdown's first step: no new connection from here on. Connects are refused by the kernel,
    /// so a proxy tries the next node (for a write too: nothing was sent). Connections already open
    /// are answered and closed (`ServerCore.answersLateRequests`, `closeIdleConnectionsIfDue`).
    func stopListening() {
        guard let listenerWsi else { return }
        // Synchronous: nothing more is accepted in this pass. Never inside the listener's own callback.
        lws_set_timeout(listenerWsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC)
    }

    /// Closes the kept-alive connections that carry no request (past `idleConnectionDrain`).
    func closeIdleConnections() {
        for wsi in connections where isIdleHTTPConnection(wsi) {
            // Asynchronous: the set is being walked, and lws may be inside a callback of this pass.
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    /// Whether an accepted connection is open with no request in hand (shutdown waits for these
    /// only up to `idleConnectionDrain`).
    var hasIdleConnection: Bool { connections.contains { isIdleHTTPConnection($0) } }

    /// An accepted connection that is neither a WebSocket nor in the middle of a request: lws
    /// empties its session slot between keep-alive transactions.
    private func isIdleHTTPConnection(_ wsi: OpaquePointer) -> Bool {
        slotObject(lws_wsi_user(wsi)) == nil
    }

    /// `LWS_CALLBACK_WSI_DESTROY`: forgets a connection (or the listener) as lws frees it.
    func forgetConnection(_ wsi: OpaquePointer) {
        if wsi == listenerWsi {
            listenerWsi = nil
            listenerDescriptor = -1
        } else {
            connections.remove(wsi)
        }
    }

    /// Before the context goes: the spare descriptor is the only one lws does not close.
    func releaseSpareDescriptor() {
        spare?.release()
        spare = nil
    }
}
