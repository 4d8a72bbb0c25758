import CWebSockets
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The state behind `HTTPServer`: everything here except the `Sendable` lets is touched only on
/// the service thread (lws callbacks and posted work).
final class ServerCore: @unchecked Sendable {  // safe: mutable state only on `loop`'s thread; lets are Sendable
    let configuration: HTTPServerConfiguration
    let responder: any HTTPResponder
    let delegate: (any WebSocketDelegate)?
    let loop: ServiceLoop
    let counter = LiveObjectCounter()
    /// Connections' kept remote addresses alive now (`remoteAddress`): one per open connection.
    let addressCounter = LiveObjectCounter()
    /// Requests whose answer is not yet handed to their connection (`dispatch`'s `alone`).
    let dispatched = DispatchedRequests()
    /// Where answers are put together before `lws_write` (`HTTPSession.writeHeaders`).
    let writeScratch = WriteScratch()
    let boundPort = Atomic<Int>(0)

    // Service-thread state.
    var nextID: UInt64 = 0
    /// Requests whose responder is running or whose response is being written, by session id.
    var inFlight: [UInt64: HTTPSession] = [:]
    /// Open (established, not yet closed) WebSockets.
    var sockets: [SocketID: WebSocketConnection] = [:]
    var isShuttingDown = false
    var drainDeadline = ContinuousClock.now
    var requestDrainDeadline = ContinuousClock.now
    /// Until when shutdown keeps idle kept-alive connections open (`idleConnectionDrain`).
    var idleDrainDeadline = ContinuousClock.now
    /// Until when shutdown waits for idle connections before closing them: `idleDrainDeadline`, or
    /// later for connections accepted just before it or taken from the listener's queue
    /// (`newConnectionGrace`).
    var idleCloseDeadline = ContinuousClock.now
    /// The open-file limit in force when the context was created (lws sizes its fd tables from it).
    var fileDescriptorLimit: UInt64 = 0
    lazy var io = ServerSocketIO(core: self)
    /// The reusable buffer for packed writes (see `FramePacker`).
    let packer = FramePacker()
    var writeStatistics = WriteStatistics()
    /// Set while posted work runs: `send` queues instead of writing, and notes the socket here.
    var isDeferringWrites = false
    var deferredWrites: [WebSocketConnection] = []
    /// The list `flushDeferredWrites` walks, swapped with `deferredWrites` so neither is reallocated.
    var flushingWrites: [WebSocketConnection] = []
    /// HTTP answers that came in while posted work ran: written after that work's frames, or
    /// before them when they go to more than `framesFirstUpTo` sockets (`woken`). Swapped with
    /// `answering` like the two lists above.
    var deferredAnswers: [UInt64] = []
    var answering: [UInt64] = []
    /// The listening socket's wsi (lws watches it as a raw file, and holds its descriptor), until
    /// shutdown.
    var listenerWsi: OpaquePointer?
    var vhost: OpaquePointer?
    /// Held back for `accept` when the process is out of descriptors (`SpareDescriptor`).
    var spare: SpareDescriptor?
    /// Connections accepted and not yet freed by lws (WebSockets too): shutdown closes the idle ones.
    /// With when each was accepted (a connection new at shutdown may not have sent its request yet).
    var connections: [OpaquePointer: ContinuousClock.Instant] = [:]
    /// Why the listening socket could not be opened, for `HTTPServer.start`'s error.
    var listenError: String?
    /// Who gets pinged or dropped at each 100 ms tick (see `HeartbeatWheel`).
    var heartbeat: HeartbeatWheel
    /// Kept-alive connections with no request in hand, closed at the keep-alive timeout (see
    /// `KeepAliveWheel`), and those whose last answer lws is still sending (`connectionWentIdle`).
    var keepAlive: KeepAliveWheel<OpaquePointer>
    var answersStillSending: Set<OpaquePointer> = []
    /// Pongs a peer may send between two heartbeat pings (`maxPongs(perPing:)`).
    let maxPongsPerPing: UInt16

    // Memory lws keeps pointers to: must outlive the context (freed in `deinit`).
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolName = strdup(ServerCore.webSocketProtocol)!
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    let drainTimer: UnsafeMutablePointer<lwsx_timer>
    /// Ends a pause in accepting (`pauseAccepting`).
    let acceptTimer: UnsafeMutablePointer<lwsx_timer>
    /// The connection whose WebSocket upgrade `confirmUpgrade` just refused, and why: its request,
    /// which lws then hands over as plain HTTP, gets 503 for the shutdown (its client reconnects
    /// elsewhere), or 400 saying what the upgrade lacked.
    var refusedUpgrade: (wsi: OpaquePointer, reason: UpgradeRefusal)?
    /// Told the status of each answer the network layer gives itself (`answerItself`); set before
    /// `start`, read on the service thread only.
    var ownAnswerObserver: (@Sendable (Int) -> Void)?
    let heartbeatTimer: UnsafeMutablePointer<lwsx_timer>
    /// The ping payload behind lws's headroom (lws writes the frame header in front of it).
    let pingPayload: UnsafeMutablePointer<UInt8>

    init(configuration: HTTPServerConfiguration, responder: any HTTPResponder, delegate: (any WebSocketDelegate)?) {
        self.configuration = configuration
        self.responder = responder
        self.delegate = delegate
        loop = ServiceLoop(name: "waybill-lws", maxQueuedWork: configuration.maxQueuedWork)
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)  // [1] stays the all-zero terminator
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = serverCallback
        // One slot for an Unmanaged session object (HTTPSession or WebSocketConnection).
        protocols[0].per_session_data_size = MemoryLayout<UnsafeMutableRawPointer?>.size
        // A chunk size, not a limit; modest because lws allocates it for every open socket.
        protocols[0].rx_buffer_size = 2048
        // Without this, lws caps every send at `rx_buffer_size` (2 KiB) and copies the rest into its own
        // buffer, drained 2 KiB per POLLOUT: a 64 KiB pack of frames took 32 sends. No per-socket memory.
        protocols[0].tx_packet_size = FramePacker.defaultCapacity + 16
        // All zero: lws's per-socket idle timers stay off (a hang-up of 0 disables them); without a
        // policy lws would use its default of 300/310 s. `HeartbeatWheel` pings instead.
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())
        heartbeat = HeartbeatWheel(interval: Self.heartbeatTicks(configuration.pingInterval))
        keepAlive = KeepAliveWheel(ticks: Self.heartbeatTicks(configuration.keepAliveTimeout, rounding: .up))
        maxPongsPerPing = Self.maxPongs(perPing: configuration.pingInterval)
        drainTimer = .allocate(capacity: 1)
        drainTimer.initialize(to: lwsx_timer())
        acceptTimer = .allocate(capacity: 1)
        acceptTimer.initialize(to: lwsx_timer())
        heartbeatTimer = .allocate(capacity: 1)
        heartbeatTimer.initialize(to: lwsx_timer())
        let headroom = lwsx_pre()
        let ping = UnsafeMutablePointer<UInt8>.allocate(capacity: headroom + Self.pingPayloadBytes.count)
        ping.initialize(repeating: 0, count: headroom)
        (ping + headroom).initialize(from: Self.pingPayloadBytes, count: Self.pingPayloadBytes.count)
        pingPayload = ping + headroom
    }

    deinit {
        protocols.deallocate()
        free(protocolName)
        retryPolicy.deallocate()
        drainTimer.deallocate()
        acceptTimer.deallocate()
        heartbeatTimer.deallocate()
        (pingPayload - lwsx_pre()).deallocate()
    }

    /// Opens the listening socket and creates the context around it; runs on the service thread.
    func makeContext() -> OpaquePointer? {
        let listener: ListeningSocket
        do {
            listener = try ListeningSocket.open(host: configuration.host, port: configuration.port)
        } catch {
            listenError = error.description
            return nil
        }
        var info = lws_context_creation_info()
        // lws listens on nothing: it is handed the connections `ListeningSocket` accepts.
        info.port = CONTEXT_PORT_NO_LISTEN_SERVER
        info.protocols = UnsafePointer(protocols)
        info.options = UInt64(LWS_SERVER_OPTION_VALIDATE_UTF8)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.keepalive_timeout = Int32(clamping: Self.wholeSeconds(configuration.keepAliveTimeout))
        info.timeout_secs = UInt32(clamping: Self.wholeSeconds(configuration.lwsTimeout))
        info.max_http_header_data = UInt16(clamping: configuration.maxHeaderBytes)
        info.pt_serv_buf_size = UInt32(HTTPSession.writeChunk)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        // One service thread holds every socket: give it the whole (raised) limit. Equal to the process
        // limit on purpose: a smaller value makes lws fall back to a slower fd lookup.
        info.count_threads = 1
        info.fd_limit_per_thread = UInt32(clamping: fileDescriptorLimit)
        loop.prepare(&info)
        guard let ctx = lws_create_context(&info) else {
            Glibc.close(listener.descriptor)
            return nil
        }
        guard watch(listener, in: ctx) else {
            listenError = "the event loop would not take the listening socket"
            lws_context_destroy(ctx)
            return nil
        }
        scheduleHeartbeat(ctx)
        return ctx
    }

    func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }

    /// Runs the posted work: on `EVENT_WAIT_CANCELLED`, or before the loop waits when the service
    /// thread posted to itself (`ServiceLoop.wokenUp`). Frames sent by the posted work are only
    /// queued, then flushed once per socket: events that arrived together leave together (see
    /// `flushDeferredWrites`).
    ///
    /// HTTP answers that arrived in the same work are written after those frames. A write posts
    /// its events before its answer, so this puts the drivers' frames on the wire ahead of the
    /// writer's answer instead of after it, without giving up the packing. Measured with the
    /// Python harness at 100 writes/s (its clients read the answer and the frames on one event
    /// loop): delivery p50 1.2 → 0.9 ms (docs/BENCHMARKS.md, 2026-12-03 12:54).
    ///
    /// Except when the frames go to more than `framesFirstUpTo` sockets in all (a dispatcher group's
    /// fan-out, or many writes' frames drained together under load): that flush takes
    /// milliseconds, and answering first lets the writers' next requests arrive meanwhile, to be
    /// committed together in the next pass and leave in one send per socket.
    /// Measured with 1 000 sockets and 4 writes in flight: +17 % frames/s, every round of four
    /// (docs/BENCHMARKS.md, 2026-12-07 (13:50– UTC)).
    func woken() {
        isDeferringWrites = true
        loop.drainInbox()
        isDeferringWrites = false
        if deferredWrites.count > Self.framesFirstUpTo {
            answerDeferred()
            flushDeferredWrites()
        } else {
            flushDeferredWrites()
            answerDeferred()
        }
    }

    /// The most sockets whose frames are flushed before the pass's HTTP answers (`woken`): a
    /// driver's or a small company's group, whose flush is tens of microseconds.
    static let framesFirstUpTo = 64

    /// Dispatches one lws callback. Reasons never leave this module.
    func handle(
        _ wsi: OpaquePointer,
        _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            woken()
            return 0  // never non-zero: that would close the wake-up pipe
        case LWS_CALLBACK_RAW_RX_FILE:
            // Only the listener is a raw file here. Once shutdown has begun it is closed, so a
            // reconnect storm against a draining server costs no descriptor and no handshake
            // (10 000 clients retrying during a drain once filled the 20 000-file limit).
            return wsi == listenerWsi ? acceptConnections() : -1
        case LWS_CALLBACK_HTTP:
            return httpRequestStarted(wsi, user)
        case LWS_CALLBACK_HTTP_BODY:
            return httpBodyReceived(wsi, user, input, length)
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            return httpBodyCompleted(wsi, user)
        case LWS_CALLBACK_HTTP_WRITEABLE:
            guard let session = slotObject(user) as? HTTPSession else { return 0 }
            let result = session.writeNext()
            if session.state == .finished { sessionFinished(session) }
            return result
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return confirmUpgrade(wsi, input, length)
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            return filterWebSocket(wsi, user)
        case LWS_CALLBACK_ESTABLISHED:
            return webSocketEstablished(wsi, user)
        case LWS_CALLBACK_RECEIVE:
            return webSocketReceived(wsi, user, input, length)
        case LWS_CALLBACK_SERVER_WRITEABLE:
            return webSocketWriteable(wsi, user)
        case LWS_CALLBACK_RECEIVE_PONG:
            return webSocketPongReceived(wsi, user)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            webSocketPeerClosing(user, input, length)
            return 0
        case LWS_CALLBACK_HTTP_DROP_PROTOCOL, LWS_CALLBACK_CLOSED_HTTP, LWS_CALLBACK_CLOSED:
            detach(user)
            return 0
        case LWS_CALLBACK_WSI_DESTROY:
            // A refused upgrade whose plain request never came (lws out of memory between the two):
            // its address must not match a later connection's.
            if refusedUpgrade?.wsi == wsi { refusedUpgrade = nil }
            detach(user)
            forgetRemoteAddress(wsi)
            forgetConnection(wsi)
            return 0
        case LWS_CALLBACK_RAW_ADOPT:
            // lws 4.1 turns a `CONNECT` request into a raw socket and clears every timeout
            // (`lws_http_to_fallback`). Nothing here speaks raw: without this the connection stayed
            // open for good, unanswered, and a client could fill the open-file limit with them.
            refuseRawConnection(wsi)
            return -1
        case LWS_CALLBACK_RAW_RX, LWS_CALLBACK_RAW_WRITEABLE:
            return -1  // never reached after the refusal above; a raw socket has nothing to say here
        default:
            return 0
        }
    }

    // MARK: Per-connection state lws keeps for us

    /// The peer's address, read once per connection: a keep-alive connection asks on every request,
    /// and each read is a `getpeername` and an `snprintf` (1.8 % of a write's CPU at 1 000/s).
    /// Kept in the wsi's `opaque_user_data`: lws zeroes it for each new connection (a wsi at a
    /// reused address starts empty), leaves it alone when it rebinds the protocol between requests
    /// (the session slot does not survive that), and `WSI_DESTROY` releases it.
    func remoteAddress(_ wsi: OpaquePointer) -> String {
        if let raw = lws_get_opaque_user_data(wsi) {
            return Unmanaged<RemoteAddress>.fromOpaque(raw).takeUnretainedValue().text
        }
        let address = LwsRequestReader.remoteAddress(wsi)
        // A failed read ("") is not kept: the next request asks again, as before.
        guard !address.isEmpty else { return address }
        lws_set_opaque_user_data(wsi, Unmanaged.passRetained(RemoteAddress(address, counter: addressCounter)).toOpaque())
        return address
    }

    private func forgetRemoteAddress(_ wsi: OpaquePointer) {
        guard let raw = lws_get_opaque_user_data(wsi) else { return }
        lws_set_opaque_user_data(wsi, nil)
        Unmanaged<RemoteAddress>.fromOpaque(raw).release()
    }

    // MARK: Session slot

    /// Puts `object` in the slot, retained; the slot owns it until `detach`.
    func attach(_ object: AnyObject, to user: UnsafeMutableRawPointer?) {
        guard let user else { return }
        detach(user)
        user.storeBytes(of: Unmanaged.passRetained(object).toOpaque(), as: UnsafeMutableRawPointer?.self)
    }

    func slotObject(_ user: UnsafeMutableRawPointer?) -> AnyObject? {
        guard let user, let raw = user.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<AnyObject>.fromOpaque(raw).takeUnretainedValue()
    }

    /// Empties the slot first, then releases: idempotent, and safe against re-entrant callbacks.
    func detach(_ user: UnsafeMutableRawPointer?) {
        guard let user, let raw = user.load(as: UnsafeMutableRawPointer?.self) else { return }
        user.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
        let object = Unmanaged<AnyObject>.fromOpaque(raw).takeRetainedValue()
        if let session = object as? HTTPSession, inFlight[session.id] === session {
            inFlight[session.id] = nil  // connection gone: a late response has nowhere to go
        } else if let connection = object as? WebSocketConnection {
            webSocketFinished(connection)
        }
    }
}

/// Why `confirmUpgrade` turned a WebSocket upgrade into a plain request.
enum UpgradeRefusal: Equatable {
    /// The server is stopping: 503, and the client reconnects elsewhere.
    case shuttingDown
    /// No `Sec-WebSocket-Key`: 400.
    case noKey
    /// Subprotocols offered, `waybill` not among them: 400.
    case noSharedSubprotocol

    /// The 400's message, or nil for the shutdown's 503.
    var message: String? {
        switch self {
        case .shuttingDown: nil
        case .noKey: "A WebSocket upgrade needs a Sec-WebSocket-Key header (RFC 6455 §4.1)."
        case .noSharedSubprotocol:
            "The upgrade offers no subprotocol this server speaks: offer \"\(ServerCore.webSocketProtocol)\", or none."
        }
    }
}

/// The lws callback: a trampoline to the `ServerCore` stored as the context's user pointer.
func serverCallback(
    _ wsi: OpaquePointer?,
    _ reason: lws_callback_reasons,
    _ user: UnsafeMutableRawPointer?,
    _ input: UnsafeMutableRawPointer?,
    _ length: Int
) -> Int32 {
    guard let wsi, let context = lws_get_context(wsi), let owner = lws_context_user(context) else { return 0 }
    // Borrowed for the call, not retained and released: the server holds its core for as long as
    // lws runs (the context is destroyed before the core goes), and the core's weak references
    // (closures that must not keep it) put its count in a side table, where every retain and
    // release takes the slow path: about 1.5 µs per request (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    return Unmanaged<ServerCore>.fromOpaque(owner)._withUnsafeGuaranteedRef { core in
        core.handle(wsi, reason, user, input, length)
    }
}

/// A connection's remote address, boxed for lws's `opaque_user_data` (counted, so a leak test
/// sees one that is never released).
final class RemoteAddress {
    let text: String
    private let counter: LiveObjectCounter

    init(_ text: String, counter: LiveObjectCounter) {
        self.text = text
        self.counter = counter
        counter.increment()
    }

    deinit { counter.decrement() }
}
