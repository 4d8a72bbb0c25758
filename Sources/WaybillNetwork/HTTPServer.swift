import CWebSockets
import Foundation
import Synchronization

/// Limits and timings of the server. Every field has a working default.
public struct HTTPServerConfiguration: Sendable {
    /// Address to listen on: a literal or "localhost"; "127.0.0.1" by default, "0.0.0.0" for every
    /// interface (IPv6 too, dual stack).
    public var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (tests), read it back from `HTTPServer.port`.
    public var port = 8080
    /// Largest request body; bigger ones get 413 (with or without Content-Length). A responder may
    /// set a lower one per route (`HTTPResponder.bodyLimit`).
    public var maxBodyBytes = 1 << 20
    /// A body up to this size is never refused by a route's own limit (nor asked about); the
    /// server's `maxBodyBytes` still applies.
    public static let bodyBytesAlwaysAllowed = 16 << 10
    /// Largest request header block; bigger ones are refused (431 or a close).
    public var maxHeaderBytes = 16 << 10
    /// Idle keep-alive connections are closed after this long, to within the heartbeat's tick (0.1 s;
    /// `KeepAliveWheel`).
    public var keepAliveTimeout: Duration = .seconds(5)
    /// Paths that accept a WebSocket upgrade; other upgrade requests are refused.
    public var webSocketPaths: Set<String> = ["/ws/orders/", "/ws/orders"]
    /// Largest incoming WebSocket message; bigger ones close the socket with 1009.
    public var maxMessageBytes = 64 << 10
    /// Per-socket outbound queue limit; over it the socket is closed with `slowConsumerCloseCode`.
    public var maxQueuedBytesPerSocket = 1 << 20
    /// The close code for slow consumers (SPEC §4: 4008, "reconnect with resume").
    public var slowConsumerCloseCode = 4008
    /// Protocol ping interval; a socket that has not answered a ping by the next one is dropped
    /// (without a close frame, within about two intervals). Pings carry a 2-byte payload.
    public var pingInterval: Duration = .seconds(25)
    /// How long shutdown waits for sockets to flush and close before it stops anyway.
    public var shutdownDrain: Duration = .seconds(3)
    /// How long shutdown waits for HTTP requests already begun (a body still arriving, a handler
    /// running, an answer going out to a slow reader). Longer than the sockets' drain: a store
    /// call may take up to its 5 s budget (SPEC §6), and a write that commits after its connection
    /// went away is one the client cannot tell happened.
    public var requestDrain: Duration = .seconds(6)
    /// How long shutdown keeps kept-alive connections that carry no request, for their client to
    /// close them; past it they are closed. A request that arrives on one meanwhile is answered, with
    /// `Connection: close`. Why: a connection closed by the server races with a request its client
    /// may be sending on it at that moment, which nginx then answers 502 and does not resend if it
    /// is a write (measured: one such 502 in six deploys). A proxy that closes its idle upstream
    /// connections sooner (nginx's upstream `keepalive_timeout`, docs/SCALING.md) never meets the
    /// race. The request drain is extended by this much. Zero (the default): closed at once.
    public var idleConnectionDrain: Duration = .zero
    /// Work items `HTTPServer.execute` may have waiting for the service thread. Past it `execute`
    /// refuses work and every WebSocket is closed with 1013 (try again later), so clients resume
    /// from their cursor instead of the server queueing without limit (docs/HARDENING.md).
    public var maxQueuedWork = 100_000
    /// The service thread's event loop; `nil` reads `WAYBILL_EVENT_LOOP` (`poll` or `libev`) at `start`,
    /// defaulting to `libev`, which scales to tens of thousands of sockets (see `EventLoopKind`).
    public var eventLoop: EventLoopKind?
    /// lws's per-step timeout (reading a request or body piece); tests shorten it.
    var lwsTimeout: Duration = .seconds(10)
    /// The longest a request body may take to arrive, however it trickles in: lws restarts its own
    /// timeout at every piece, so a byte every few seconds would otherwise hold the connection (and
    /// its buffers) for days. Past it the answer is 408 and the connection closes.
    public var bodyDeadline: Duration = .seconds(30)
    /// The defaults above.
    public init() {}
}

/// An HTTP/1.1 and WebSocket server on one port, over libwebsockets.
///
/// One service thread owns the lws context and makes every lws call; HTTP handlers run in Swift
/// tasks and WebSocket delegate calls run on the service thread. Any thread may call the methods
/// below. Call `shutdown()` before dropping the server: the thread keeps it alive until then.
///
/// Request headers read: authorization, content-type, content-length, if-none-match, if-match,
/// transfer-encoding, connection, host, origin, user-agent, accept, cookie, sec-websocket-protocol,
/// x-forwarded-for, idempotency-key, x-request-id, last-event-id.
public final class HTTPServer: Sendable {
    let core: ServerCore

    /// - Parameters:
    ///   - webSocketDelegate: receives socket events on the service thread; the server keeps a
    ///     strong reference to it until `shutdown()` has finished.
    public init(
        configuration: HTTPServerConfiguration, responder: any HTTPResponder,
        webSocketDelegate: (any WebSocketDelegate)?
    ) {
        core = ServerCore(configuration: configuration, responder: responder, delegate: webSocketDelegate)
    }

    /// Binds and starts the service thread.
    ///
    /// Also raises the process's soft open-file limit to its hard limit (each socket is a file).
    /// - Throws: `HTTPServerError` if the port cannot be bound, `WAYBILL_EVENT_LOOP` is invalid, the
    ///   libev plugin is missing, or `start` was called before.
    public func start() throws {
        LwsLog.install()
        signal(SIGPIPE, SIG_IGN)  // a peer that goes away mid-write must not kill the process
        let core = self.core
        guard !core.loop.hasStarted else { throw HTTPServerError(description: "the server was already started") }
        let kind = try core.configuration.eventLoop ?? EventLoopKind.fromEnvironment()
        try kind.checkAvailable()
        core.fileDescriptorLimit = FileDescriptorLimit.raiseSoftToHard()
        // Weak: the loop is the core's, and these would hold the core (and through its delegate the
        // hub, and everything the responder holds) for ever after `shutdown`.
        core.loop.shouldStop = { [weak core] in core?.isDrained ?? true }
        core.loop.wokenUp = { [weak core] in core?.woken() }
        core.loop.onOverflow = { [weak core] in core?.closeAllWebSockets(code: 1013, reason: "server overloaded; reconnect") }
        core.loop.willDestroy = { [weak core] in
            core?.cancelDrainCheck()
            core?.cancelHeartbeat()
            core?.releaseSpareDescriptor()
        }
        do {
            // The service thread keeps this server (and what holds it weakly: the hub's posts)
            // alive until it ends, as the type's documentation says, and no longer.
            try core.loop.start(kind: kind) { [self] in withExtendedLifetime(self) { core.makeContext() } }
        } catch {
            let reason = core.listenError.map { ": \($0)" } ?? ""
            throw HTTPServerError(description: "cannot listen on \(core.configuration.host):\(core.configuration.port)\(reason)")
        }
    }

    /// The bound port (after `start`; useful with port 0).
    public var port: Int { core.boundPort.load(ordering: .sequentiallyConsistent) }

    /// Runs `body` on the service thread with socket access. Any thread; dropped after shutdown.
    ///
    /// - Returns: `false` if `body` was dropped: after shutdown, or because `maxQueuedWork` items
    ///   already wait (then every WebSocket is closed with 1013 once the thread catches up, so
    ///   no socket is left missing what `body` would have done).
    @discardableResult
    public func execute(_ body: @escaping @Sendable (any SocketIO) -> Void) -> Bool {
        let core = self.core
        return core.loop.post({ body(core.io) }, bounded: true)
    }

    /// `execute` without the bound: for the caller's bookkeeping that must not be lost and is rare
    /// by construction (the hub's receipts and rewind notices). Never refused.
    public func executeAlways(_ body: @escaping @Sendable (any SocketIO) -> Void) {
        let core = self.core
        _ = core.loop.post({ body(core.io) }, bounded: false)
    }

    /// For a thread that hands the server work in bursts — `execute` calls and the answers of
    /// handlers running on it, like the store's writer thread: between `beginPostingBatch()` and
    /// `endPostingBatch(idle:)` its work does not wake the service thread item by item. The
    /// wake-up goes out at `flushPostingBatch()` (call it before blocking), when the thread ends
    /// a batch idle, or at the latest at the end of its next batch. Other threads are not
    /// affected. (`ServiceLoop`, "Batches".)
    public func beginPostingBatch() { core.loop.beginBatch() }

    /// Sends what the calling thread's batch holds now (see `beginPostingBatch`).
    public func flushPostingBatch() { core.loop.flushBatch() }

    /// Ends the calling thread's batch; `idle` when it has nothing more to do (see `beginPostingBatch`).
    public func endPostingBatch(idle: Bool) { core.loop.endBatch(idle: idle) }

    /// Calls `observer` with the status of each answer the server gives itself instead of the
    /// responder (400 for a framing it refuses, 408, 411, 413, 503 while stopping), on the service
    /// thread: keep it quick. Call before `start`.
    public func observeOwnAnswers(_ observer: @escaping @Sendable (Int) -> Void) {
        precondition(!core.loop.hasStarted, "observeOwnAnswers must be called before start")
        core.ownAnswerObserver = observer
    }

    /// Work `execute` refused because `maxQueuedWork` items were waiting (a metric).
    public var refusedWork: Int { core.loop.overflows }

    /// Wake-ups sent to the service thread so far (`eventfd` writes; for tests). Work the service
    /// thread hands itself on the libev loop sends none: it runs before the loop next waits.
    public var serviceWakeUps: Int { core.loop.wakeUps }

    /// Graceful stop: close the listening socket (connects are refused), finish in-flight HTTP
    /// (each answer closes its connection), answer requests on connections kept from before while
    /// `idleConnectionDrain` lasts (503 and a close after it; upgrades are refused), close every
    /// socket with 1001 after flushing its queue, wait up to `shutdownDrain` for the sockets and
    /// `requestDrain` (+ `idleConnectionDrain`) for requests in flight, then destroy the context.
    /// Returns when the thread has ended.
    /// Safe to call more than once, and before `start` (then it returns at once).
    public func shutdown() async {
        let core = self.core
        guard core.loop.hasStarted else { return }
        core.loop.post { core.beginShutdown() }
        await core.loop.waitUntilEnded()
    }

    /// The event loop the service thread runs (after `start`).
    public var eventLoop: EventLoopKind { core.loop.kind }

    /// The open-file limit lws was given (after `start`).
    public var fileDescriptorLimit: Int { Int(core.fileDescriptorLimit) }

    /// The output counters, read on the service thread (tests; zero once the server has ended).
    func writeStatistics() async -> WriteStatistics {
        let core = self.core
        return await withCheckedContinuation { (c: CheckedContinuation<WriteStatistics, Never>) in
            let posted = core.loop.post {
                var statistics = core.writeStatistics
                statistics.loopPasses = core.loop.passes
                statistics.timerTicks &+= core.loop.timerTicks
                c.resume(returning: statistics)
            }
            if !posted { c.resume(returning: WriteStatistics()) }
        }
    }

    /// Per-request and per-socket Swift objects alive now (for leak tests).
    public var liveSessionObjects: Int { core.counter.value }
    /// Remote addresses kept for open connections (one per connection that made a request; tests).
    public var liveConnectionAddresses: Int { core.addressCounter.value }
}

/// The server could not start.
public struct HTTPServerError: Error, CustomStringConvertible {
    /// What went wrong, for logs.
    public var description: String
}
