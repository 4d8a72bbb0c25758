import CWebSockets
import Foundation

/// A client-only lws context with its own service thread, shared by any number of
/// `WebSocketClient`s (tests, the Linux driver app).
///
/// Call `shutdown()` when done; open clients then see `.closed(code: nil, …)`.
///
/// The loop is `poll` by default, unlike the server's: a client loop holds a handful of sockets (one
/// in the driver app), where `poll()` costs no more than epoll, needs no plugin at run time, and has
/// no libev timer trap. `libev` is there for programs that open thousands of clients from one loop.
public final class WebSocketClientLoop: Sendable {
    let core: ClientLoopCore

    /// Creates the context and starts its thread.
    /// - Throws: `WebSocketClientError` if lws cannot create the context (or the libev plugin is missing).
    public init(eventLoop: EventLoopKind = .poll) throws {
        LwsLog.install()
        signal(SIGPIPE, SIG_IGN)
        let core = ClientLoopCore()
        self.core = core
        core.loop.shouldStop = { core.isStopping }
        do {
            try eventLoop.checkAvailable()
            try core.loop.start(kind: eventLoop) { core.makeContext() }
        } catch {
            throw WebSocketClientError(.connectFailed, "cannot create the client context")
        }
    }

    /// A loop dropped without `shutdown()` still ends its thread (clients keep the loop alive).
    deinit {
        let core = self.core
        core.loop.post { core.isStopping = true }
    }

    /// The event loop its thread runs.
    public var eventLoop: EventLoopKind { core.loop.kind }

    /// Closes every client without a close handshake, destroys the context and ends the thread.
    /// Blocks until the thread has ended; safe to call twice, from any thread.
    public func shutdown() {
        let core = self.core
        if !core.loop.post({ core.isStopping = true }) { return }
        core.loop.waitUntilEndedBlocking()
    }
}

/// The client loop's state; touched only on its service thread, except the `Sendable` lets.
final class ClientLoopCore: @unchecked Sendable {  // safe: vars only on `loop`'s thread
    let loop = ServiceLoop(name: "waybill-lws-client")
    var isStopping = false
    /// Strong references for lws's unretained `opaque_user_data`, until the terminal callback.
    var connections: [ObjectIdentifier: ClientConnection] = [:]

    private let protocols: UnsafeMutablePointer<lws_protocols>
    let protocolName = strdup("waybill-client")!

    init() {
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = clientCallback
        protocols[0].rx_buffer_size = 4096
    }

    deinit {
        protocols.deallocate()
        free(protocolName)
    }

    func makeContext() -> OpaquePointer? {
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.connect_timeout_secs = 10
        loop.prepare(&info)
        return lws_create_context(&info)
    }

    /// Service thread: starts the lws connection for `connection`.
    func start(_ connection: ClientConnection) {
        guard let context = loop.context, !isStopping else {
            connection.finish(error: WebSocketClientError(.connectFailed, "the client loop has ended"))
            return
        }
        var info = lws_client_connect_info()
        info.context = context
        info.port = Int32(connection.port)
        info.ietf_version_or_minus_one = -1
        // An upgrade answered with a redirect fails: lws would follow it, to another host whose
        // name it resolves with a blocking lookup on this thread, sending the socket's ticket
        // there too. The HTTP transports do not follow redirects either (a review, 2026-12-07).
        info.ssl_connection = Int32(bitPattern: UInt32(LCCSCF_HTTP_NO_FOLLOW_REDIRECT.rawValue))
        info.opaque_user_data = Unmanaged.passUnretained(connection).toOpaque()
        connection.state = .connecting
        connections[ObjectIdentifier(connection)] = connection
        // lws copies the strings during the call, so temporaries are fine.
        let wsi = connection.address.withCString { address in
            connection.path.withCString { path in
                connection.hostHeader.withCString { host in
                    info.address = address
                    info.path = path
                    info.host = host
                    info.origin = host
                    info.local_protocol_name = UnsafePointer(protocolName)
                    return lws_client_connect_via_info(&info)
                }
            }
        }
        guard let wsi else {
            connections[ObjectIdentifier(connection)] = nil
            connection.finish(error: WebSocketClientError(.connectFailed, "lws refused the connection"))
            return
        }
        connection.wsi = wsi
    }

    /// Service thread: gives up on a connection that has not finished its handshake.
    func connectTimedOut(_ connection: ClientConnection) {
        guard connection.state == .connecting else { return }
        if let wsi = connection.wsi { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }
        connection.resumeConnect(.failure(WebSocketClientError(.timedOut, "no handshake in time")))
    }

    func send(_ frame: OutboundFrame, on connection: ClientConnection) {
        guard connection.state == .open || connection.state == .connecting, connection.pendingClose == nil else {
            return
        }
        connection.queue.append(frame)
        if connection.state == .open, let wsi = connection.wsi { lws_callback_on_writable(wsi) }
    }

    func close(_ connection: ClientConnection, code: Int, reason: String) {
        guard connection.state == .open || connection.state == .connecting, connection.pendingClose == nil else {
            return
        }
        connection.pendingClose = (code, reason)
        if connection.state == .open, let wsi = connection.wsi {
            lws_callback_on_writable(wsi)
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 5)  // bound the close handshake
        }
    }
}
