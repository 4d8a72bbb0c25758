public import WaybillBroker
public import WaybillStorage
import Foundation
import Synchronization
public import WaybillDomain
import WaybillNetwork
public import WaybillObservability
import WaybillRealtime

/// The whole server: HTTP API, WebSocket hub and the live path (outbox relay, hub feed, pruner,
/// session watcher) over a store and a broker. Any number of servers may share one store and broker.
///
/// `start` returns once the port is bound; `shutdown` closes sockets with 1001 after flushing,
/// stops the background services and returns. The store stays open (the caller owns it).
public final class WaybillServer: Sendable {
    private let http: HTTPServer
    private let hub: Hub
    private let services: Task<Void, Never>
    private let relay: OutboxRelay
    private let store: any OrderStore
    let pool: KeyStretchingPool  // internal: tests read its queue (`LoginFloodTests`)
    private let metrics: Metrics
    /// Whether this server observes the store writer's batches (removed at `shutdown`).
    private let observesWriterBatches: Bool
    /// Whether this server observes the store's commits (the local path; removed at `shutdown`).
    private let observesCommits: Bool
    /// Set by the first `shutdown`: a second one must not remove observers that a newer server on
    /// the same store has installed since (the slots hold one observer, whoever set it).
    private let observersRemoved = Atomic<Bool>(false)
    /// The logger every part of this server writes to (with `node=…` when `nodeID` is set).
    public let logger: Logger

    /// The bound TCP port.
    public var port: Int { http.port }

    /// Its largest parts, for a test that checks they are freed after `shutdown`.
    var parts: [AnyObject] { [http, hub, metrics] }

    private init(
        http: HTTPServer, hub: Hub, services: Task<Void, Never>, relay: OutboxRelay, store: any OrderStore,
        pool: KeyStretchingPool, metrics: Metrics, observesWriterBatches: Bool, observesCommits: Bool, logger: Logger
    ) {
        self.observesWriterBatches = observesWriterBatches
        self.observesCommits = observesCommits
        self.pool = pool
        self.metrics = metrics
        self.store = store
        self.http = http
        self.hub = hub
        self.services = services
        self.relay = relay
        self.logger = logger
    }

    /// Builds every part, binds the port and starts the background services.
    public static func start(
        configuration: ServerConfiguration, store: any OrderStore, broker: any Broker, logger: Logger,
        clock: any WallClock = SystemWallClock()
    ) async throws -> WaybillServer {
        let logger = configuration.nodeID.map { logger.adding(["node": $0]) } ?? logger
        let metrics = Metrics(nodeID: configuration.nodeID)
        let store = MeteredOrderStore(store, metrics: metrics)  // every part's transactions are counted
        // Subscribed before the store's newest cursor is read, so the hub misses nothing after it;
        // sockets that resume from older events get them by replay.
        let subscription = broker.subscribe()
        let newest = try await HubFeed.newestCursor(in: store)
        let pool = KeyStretchingPool(
            threads: configuration.keyStretchingThreads, queueLimit: configuration.keyStretchingQueueLimit,
            maxWait: configuration.keyStretchingMaxWait)
        let throttle = LoginThrottle(
            store: store, clock: clock, emailLimit: configuration.loginAttemptsPerEmail,
            addressLimit: configuration.loginAttemptsPerAddress, window: configuration.loginWindow)
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: configuration.passwordIterations, pool: pool),
            pool: pool, throttle: throttle, ticketLifetime: configuration.ticketLifetime,
            tokenLifetime: configuration.tokenLifetime, tokenIdleLimit: configuration.tokenIdleLimit, metrics: metrics,
            requestLimiter: UserRequestLimiter(
                .init(perSecond: configuration.userRequestsPerSecond, burst: configuration.userRequestBurst)),
            logger: logger)
        let relay = OutboxRelay(
            store: store, broker: broker, metrics: metrics, logger: logger,
            configuration: .init(
                publishTimeout: configuration.publishTimeout, pollInterval: configuration.relayPollInterval,
                minimumRoundInterval: configuration.relayMinimumRoundInterval))
        let localPath = LocalPath()
        let committed: @Sendable ([StoredEvent]) -> Void = { events in
            metrics.eventsCommitted(events.count)
            // On the local path the store's commit observer has handed them over already.
            if !localPath.isOn { relay.committed(events) }
        }
        let orders = OrderService(store: store, clock: clock, committed: committed)
        var limits = Hub.Limits()
        limits.maxConcurrentAuthentications = configuration.maxConcurrentSocketAuthentications
        limits.authenticationTimeout = configuration.socketAuthenticationTimeout
        limits.maxConcurrentReplays = configuration.maxConcurrentReplays
        limits.maxSocketsPerUser = configuration.maxSocketsPerUser
        // A user's sockets together: 200 frames a second, or one a second per socket the user may
        // open when that is more (a raised `--max-sockets-per-user`, as the benchmarks' 15 000
        // sockets of a few tokens, each pinging every 10 s, raise it).
        limits.maxFramesPerUserPerSecond = max(limits.maxFramesPerUserPerSecond, Double(configuration.maxSocketsPerUser))
        limits.userFrameBurst = max(limits.userFrameBurst, 2 * configuration.maxSocketsPerUser)
        limits.maxReplayBufferEvents = configuration.maxReplayEvents
        // The replay may take half the socket's outbound limit (below) and the live events buffered
        // meanwhile the other half, less room for `connected`, a `reset` and the owed pongs: they go
        // out together when the replay answers.
        limits.maxReplayBufferBytes = configuration.maxQueuedBytesPerSocket / 2 - 4096
        let hub = Hub(
            authenticator: auth, store: store, metrics: metrics, logger: logger, startingAfter: newest,
            configuration: .init(
                maxReplayEvents: configuration.maxReplayEvents, maxReplayBytes: configuration.maxQueuedBytesPerSocket / 2,
                limits: limits),
            receipts: .init(now: { clock.now() }, committed: committed))
        let closeSockets: @Sendable (Logout) -> Void = { logout in
            hub.execute { io in hub.closeSockets(revokedBy: logout, io: io) }
        }
        // Logouts made on any node: close the sockets they revoked here and drop cached tokens.
        let sessions = SessionWatcher(
            store: store, interval: configuration.sessionPollInterval, now: { clock.now() }, logger: logger,
            // Logouts may have been pruned unread: each connected user's session epoch says which
            // of their sockets to close (`Hub.sweepSessions`).
            lostTrack: { hub.sweepSessions(at: clock.now()) { user in auth.forget(user: user) } }
        ) { logout in
            auth.forget(user: logout.userID)
            closeSockets(logout)
        }
        // A logout made here is acted on at once, and only once: the watcher's poll skips it (a
        // second close would find nothing more to close; session epochs spare a login made since).
        let loggedOutHere: @Sendable (Logout) -> Void = { logout in
            sessions.actedOn(logout)
            closeSockets(logout)
        }
        let routes = Routes(
            orders: orders, authenticator: auth, health: HealthChecks(store: store, metrics: metrics, clock: clock),
            staticFiles: StaticFiles(directory: configuration.webDirectory ?? StaticFiles.bundled),
            metricsToken: configuration.metricsToken.map(Secret.init), loggedOut: loggedOutHere,
            idempotency: IdempotencyGuard(
                store: store, clock: clock, claimTimeout: configuration.idempotencyClaimTimeout, logger: logger),
            clientAddress: ClientAddress(trustedProxies: configuration.trustedProxies))
        let responder = APIResponder(
            router: routes.router(), authenticator: auth, metrics: metrics, logger: logger,
            writerExecutor: store.writerExecutor, inlineWrites: configuration.inlineWrites)
        let http = HTTPServer(configuration: networkConfiguration(configuration), responder: responder, webSocketDelegate: hub)
        // Weak: the HTTP server holds the hub (its socket delegate) and the metrics (its responder's):
        // held back, a server that shut down was never freed (found by a review, 2026-12-05).
        hub.execute = { [weak http] body in _ = http?.execute(body) }
        hub.executeAlways = { [weak http] body in http?.executeAlways(body) }
        metrics.readAtScrape(.serviceQueue) { [weak http] in http?.refusedWork ?? 0 }
        metrics.readAtScrape(.brokerBuffer) { broker.droppedBatches }
        http.observeOwnAnswers { [weak metrics] status in metrics?.recordNetworkAnswer(status: status) }
        do { try http.start() } catch {
            pool.stop()
            throw error
        }
        // Writes run on the store's writer thread (`APIResponder.executor(for:)`): their answers and
        // event frames wake the service thread once per burst. `shutdown` removes the observer
        // (it would keep this server alive, and the store with it). A store shared by a second
        // server keeps the first one's; the second's wake-ups are then simply not batched.
        let batching = store.writerExecutor?.observeBatches { [weak http] point in
            guard let http else { return }
            switch point {
            case .started: http.beginPostingBatch()
            case .committing: http.flushPostingBatch()
            case .ended(let idle): http.endPostingBatch(idle: idle)
            }
        } ?? false

        let feed = HubFeed(broker: broker, store: store, target: hub, metrics: metrics, logger: logger)
        // The local path: with an in-process broker, this process's commits go from the store's
        // writer thread straight into the feed (no relay → broker → feed hand-offs); the relay
        // still persists its cursor and publishes what other processes commit to the same file.
        // A network broker keeps every event on the relay's path, so all nodes see one order.
        if broker.publishNeverStalls,
            store.observeCommits({ events in
                feed.committedHere(events)
                relay.delivered(events)
            })
        {
            localPath.turnOn()
        }
        let pruner = OutboxPruner(
            store: store, retention: configuration.outboxRetention,
            idempotencyRetention: configuration.idempotencyRetention, interval: configuration.pruneInterval,
            now: { clock.now() }, logger: logger)
        let healthWatcher = StoreHealthWatcher(store: store, logger: logger, clock: ContinuousClock())
        let services = Task {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await feed.run(first: subscription, startingAfter: newest) }
                group.addTask { await relay.run() }
                group.addTask { await pruner.run() }
                group.addTask { await sessions.run() }
                group.addTask { await healthWatcher.run() }
            }
        }
        logger.info("server started", ["host": configuration.host, "port": "\(http.port)"])
        return WaybillServer(
            http: http, hub: hub, services: services, relay: relay, store: store, pool: pool, metrics: metrics,
            observesWriterBatches: batching, observesCommits: localPath.isOn, logger: logger)
    }

    /// The newest event id the hub has fanned out (what a `connected` frame reports now).
    ///
    /// Read from the metrics the hub updates on every delivery, not from the service thread: it
    /// answers at once, also after `shutdown()` (when no work posted to that thread would run).
    public func deliveredThrough() async -> EventID {
        EventID(metrics.deliveredEventID)
    }

    /// Waits until the hub has fanned out every event committed so far (tests and tools use it
    /// after writing directly to the store); gives up after `timeout`.
    /// - Returns: whether it caught up.
    @discardableResult
    public func waitUntilDelivered(timeout: Duration = .seconds(10)) async throws -> Bool {
        let newest = try await store.read { tx in try tx.newestEventID() }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if await deliveredThrough() >= newest { return true }
            relay.notify()
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    /// Graceful stop: 1001 to every socket after its queue is flushed, in-flight requests finish,
    /// background services end (the relay persists its cursor and gives up its lease). Committed
    /// events not yet relayed stay in the outbox for the next leader.
    public func shutdown() async {
        logger.info("server stopping")
        await http.shutdown()
        if !observersRemoved.exchange(true, ordering: .acquiringAndReleasing) {
            if observesWriterBatches { store.writerExecutor?.stopObservingBatches() }
            // The store outlives this server (the caller owns it): let go of the feed and the relay.
            if observesCommits { store.stopObservingCommits() }
        }
        pool.stop()
        services.cancel()
        await services.value
        logger.info("server stopped")
    }

    private static func networkConfiguration(_ c: ServerConfiguration) -> HTTPServerConfiguration {
        var n = HTTPServerConfiguration()
        n.host = c.host
        n.port = c.port
        n.maxBodyBytes = c.maxBodyBytes
        n.pingInterval = c.pingInterval
        n.maxQueuedBytesPerSocket = c.maxQueuedBytesPerSocket
        n.maxMessageBytes = 4096  // clients send pings and `seen` frames (≤ 100 entries)
        n.shutdownDrain = c.shutdownDrain
        n.requestDrain = c.requestDrain
        n.idleConnectionDrain = c.idleConnectionDrain
        n.keepAliveTimeout = c.keepAliveTimeout
        n.maxQueuedWork = c.maxQueuedServiceWork
        return n
    }
}

/// Whether the local path is on (see `WaybillServer.start`): set once, before the first request.
private final class LocalPath: Sendable {
    private let on = Atomic<Bool>(false)
    var isOn: Bool { on.load(ordering: .acquiring) }
    func turnOn() { on.store(true, ordering: .releasing) }
}
