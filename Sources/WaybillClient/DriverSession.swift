public import Foundation

/// A driver's live view of their orders: the list, the details they opened, and the connection behind them.
///
/// The session follows SPEC §5: an event is only a signal, state always comes from the REST API. It keeps
/// the order list current by refetching it when events arrive (coalesced), when the socket reconnects and
/// every ``Configuration/pollInterval`` as a safety net; it refetches an opened detail when that order
/// changes. It reconnects dropped sockets under its ``ReconnectPolicy`` and resumes after the last event seen.
///
/// ```swift
/// let session = DriverSession(api: api, transport: URLSessionEventTransport())
/// await session.start()
/// for await update in await session.updates() { … }
/// ```
///
/// Time, randomness, HTTP and WebSocket are all injected, so tests drive it with a virtual clock.
/// An actor: every method may be called from any task.
///
/// ## Topics
/// - Lifecycle: ``start()``, ``stop()``, ``appDidBecomeActive()``, ``networkDidBecomeAvailable()``
/// - State: ``orders``, ``connectionState``, ``detail(_:)``, ``cachedDetail(_:)``, ``closeDetail(_:)``, ``updates()``
/// - Actions: ``queue(_:expecting:)`` (offline-safe), ``pendingActions(for:)``, ``refusedActions``,
///   ``changeStatus(of:to:expecting:)``, ``completeStage(_:of:expecting:)``,
///   ``attachDocument(named:kind:to:expecting:)`` (online only: they throw), ``refresh()``
public actor DriverSession {
    /// Timing of a session. Every field has the production default.
    public struct Configuration: Sendable {
        /// How dropped sockets are retried. Default ``ReconnectPolicy/standard``.
        public var reconnectPolicy: ReconnectPolicy
        /// The safety-net poll of the order list. Default 120 s.
        public var pollInterval: Duration
        /// Events within this window cost one list fetch and one fetch per affected detail. Default 250 ms.
        public var coalescingWindow: Duration
        /// How often a socket is pinged; one silent interval after a ping and it counts as dropped.
        /// Default 30 s; `nil` turns the heartbeat off (the transport must then notice dead sockets).
        public var heartbeatInterval: Duration?
        /// When queued actions are retried and when the queue gives up on one (``ActionQueuePolicy``).
        public var actionPolicy: ActionQueuePolicy
        /// How long queued actions wait, after a socket that resumes connects, for the server to say
        /// whether its history is the one the session resumes from (a `reset`, or the pong that
        /// comes after the replay). Past it they go anyway. Default 10 s.
        public var resumeCheckLimit: Duration
        /// When a list fetch the server answered with "wait" (429, a 5xx) is tried again: default
        /// 1 s doubling to 30 s, full jitter (``ReconnectPolicy``; never later than the poll).
        public var listRetryPolicy: ReconnectPolicy

        /// A configuration with the given fields.
        public init(
            reconnectPolicy: ReconnectPolicy = .standard,
            pollInterval: Duration = .seconds(120),
            coalescingWindow: Duration = .milliseconds(250),
            heartbeatInterval: Duration? = .seconds(30),
            actionPolicy: ActionQueuePolicy = ActionQueuePolicy(),
            resumeCheckLimit: Duration = .seconds(10),
            listRetryPolicy: ReconnectPolicy = ReconnectPolicy(base: .seconds(1), cap: .seconds(30))
        ) {
            self.reconnectPolicy = reconnectPolicy
            self.pollInterval = pollInterval
            self.coalescingWindow = coalescingWindow
            self.heartbeatInterval = heartbeatInterval
            self.actionPolicy = actionPolicy
            self.resumeCheckLimit = resumeCheckLimit
            self.listRetryPolicy = listRetryPolicy
        }
    }

    let api: any OrdersAPI
    let transport: any EventTransport
    /// The injected clock, reduced to the one thing the session does with time: start a timer *now*.
    ///
    /// The returned function sleeps until the timer's `n`-th tick, `n × period` after the timer was started.
    /// Deadlines are fixed when the timer starts (on the actor), not when its task first runs, so a timer
    /// fires at the right instant however late its task gets scheduled, and periodic ticks never drift.
    let startTimer: @Sendable (Duration) -> @Sendable (Int) async throws -> Void
    /// A stopwatch on the session's clock: the time since it was started.
    let startStopwatch: @Sendable () -> @Sendable () -> Duration
    var random: any RandomNumberGenerator & Sendable
    /// Wall-clock time, only for the age of queued actions (which must survive a restart, unlike an instant).
    let wallClock: @Sendable () -> Date
    let actionStorage: any ActionStorage

    var machine: StateMachine
    var coalescer: Coalescer
    var list: ListLoader
    var detailFetches = FetchDeduplicator<OrderID>()
    var isRunning = false
    var runWaiters: [AsyncStream<Never>.Continuation] = []
    let heartbeatInterval: Duration?
    var heartbeat: Heartbeat?

    /// The driver's orders as of the last successful list fetch (empty until then).
    public internal(set) var orders: [OrderSummary] = []
    /// Whether the list has been fetched at least once.
    public internal(set) var hasLoadedOrders = false
    /// Orders whose detail the app opened: these are "cached" in the sense of the sync rules.
    var openDetails: Set<OrderID> = []
    var details: [OrderID: CachedDetail] = [:]
    /// How many `reset`s this session has had. An answer read before the last one may show what no
    /// longer exists, and one read after it is the truth even when its version is lower (a restore
    /// or a failover took versions back): the cache compares versions only within one history.
    var historyGeneration = 0
    var detailTasks: [OrderID: Task<Result<OrderDetail, WaybillClientError>, Never>] = [:]

    // Timers and the socket; each replaced or cancelled by the code that owns it.
    var connectionGeneration = 0
    var connectionTask: Task<Void, Never>?
    var connection: (any EventConnection)?
    var backoffTask: Task<Void, Never>?
    var coalescingTask: Task<Void, Never>?
    var pollTask: Task<Void, Never>?
    var heartbeatTask: Task<Void, Never>?
    /// Tells the machine once the live socket has lasted the policy's `stableAfter`.
    var stabilityTask: Task<Void, Never>?
    var listTask: Task<Void, Never>?
    var actionTask: Task<Void, Never>?
    var actionBackoffTask: Task<Void, Never>?
    /// The head's own send was just answered 401 (applied nothing) and the session is stopping for it.
    var headRefusedByServer = false
    /// Ends the wait for a resume's outcome after the configuration's `resumeCheckLimit`.
    var resumeCheckTask: Task<Void, Never>?
    /// Whether queued actions were held for a resume's outcome at the end of the last `perform`.
    var actionsHeldForResume = false
    /// Receipts waited for the same outcome: before a `reset`, a version may name content the
    /// driver never saw (a restore), and a receipt would tell the dispatcher it was seen.
    var receiptsHeldForResume = false
    /// The `historyGeneration` in which the list fetch that set `orders` was asked for.
    var ordersGeneration = 0
    let resumeCheckLimit: Duration
    /// When a list fetch answered "wait" is tried again (`Configuration.listRetryPolicy`), and when
    /// the poll comes after an opened detail's refetch was answered so.
    let listRetryPolicy: ReconnectPolicy
    /// Opened details' refetches answered "wait" in a row, one per poll they brought forward
    /// (`pollSoonForDetails`); 0 again after a detail fetch that worked, a stop, or once no order is open.
    var detailRetryAttempt = 0
    /// The poll's countdown now: time since it was armed, and its length (nil while none runs).
    var pollCountdown: (elapsed: @Sendable () -> Duration, interval: Duration)?

    // The offline queue and receipts.
    var actionQueue: ActionQueue
    var refused: [QueuedAction] = []
    var receipts = ReceiptTracker()
    var receiptSends: Task<Void, Never>?

    var subscribers: [Int: AsyncStream<SessionUpdate>.Continuation] = [:]
    var nextSubscriberID = 0
    var publishedState: ConnectionState

    struct CachedDetail: Sendable {
        var detail: OrderDetail
        var etag: String?
        /// The `historyGeneration` its request was sent in.
        var generation: Int

        /// Whether an answer of `version`, requested in history `generation`, replaces this copy:
        /// always when asked for after a `reset` this copy predates, never when asked for before
        /// one it postdates, and otherwise when it is at least as new (`orSame`) or newer. (An answer
        /// asked for before the session's last reset may thus replace a copy as old as itself; it
        /// is then kept without its tag.)
        func isReplaced(byVersion version: Int64, readIn generation: Int, orSame: Bool) -> Bool {
            if generation != self.generation { return generation > self.generation }
            return orSame ? version >= detail.version : version > detail.version
        }
    }

    /// A session that talks to `api` and `transport`; it does nothing until ``start()``.
    ///
    /// - Parameters:
    ///   - api: the REST API, usually an ``HTTPOrdersAPI``.
    ///   - transport: opens the event socket (`URLSessionEventTransport` on Apple platforms, the
    ///     libwebsockets client of WaybillNetwork on Linux).
    ///   - clock: drives backoff, polling and coalescing; tests pass a virtual clock.
    ///   - configuration: timing; the defaults are the production values.
    ///   - random: the source of reconnect jitter and of idempotency keys; tests pass a seeded generator.
    ///   - actionStorage: where the offline queue is kept; a queue left there by an earlier session (an app
    ///     restart) is resumed. Default: memory only (nothing survives the process).
    ///   - wallClock: the time stamped on queued actions, to give up on old ones; tests pass a fixed one.
    ///   - actionStorageClaim: a claim the caller holds on `actionStorage` (``ActionStorage/claim()``),
    ///     which the session then uses instead of claiming the storage itself: an app that claims its
    ///     queue before it logs in (`waybill driver`, to refuse a second instance at once). Without
    ///     it, a session over a storage its caller has claimed keeps no action. One session at a
    ///     time: a claim another session still has (it has not stopped) is ignored, and this one
    ///     claims the storage itself (so it keeps no action while the other's claim lives); a
    ///     session gives it back when it stops or is refused. The file stays claimed while the
    ///     caller keeps a reference to the claim, whatever the session does.
    public init(
        api: any OrdersAPI,
        transport: any EventTransport,
        clock: some Clock<Duration> = ContinuousClock(),
        configuration: Configuration = Configuration(),
        random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        actionStorage: any ActionStorage = InMemoryActionStorage(),
        wallClock: @escaping @Sendable () -> Date = { Date() },
        actionStorageClaim: ActionStorageClaim? = nil
    ) {
        self.api = api
        // Handed over once: two live sessions sharing one claim would write over each other's queue.
        let callersClaim = actionStorageClaim.flatMap { $0.adopt() ? $0 : nil }
        self.callersClaim = callersClaim
        self.transport = transport
        self.startTimer = { period in
            let start = clock.now
            return { tick in try await clock.sleep(until: start.advanced(by: period * tick), tolerance: nil) }
        }
        self.startStopwatch = {
            let start = clock.now
            return { start.duration(to: clock.now) }
        }
        self.random = random
        machine = StateMachine(policy: configuration.reconnectPolicy)
        coalescer = Coalescer(window: configuration.coalescingWindow)
        list = ListLoader(pollInterval: configuration.pollInterval)
        heartbeatInterval = configuration.heartbeatInterval
        resumeCheckLimit = configuration.resumeCheckLimit
        listRetryPolicy = configuration.listRetryPolicy
        publishedState = machine.state
        self.actionStorage = actionStorage
        self.wallClock = wallClock
        // Another session holds the storage: nothing is read or written until it lets go (then the
        // queue is read before the first action is kept, as for a storage that could not be read).
        let stored: (actions: [QueuedAction], refused: [QueuedAction], problem: StoredQueueProblem?)
        do {
            actionClaim = try callersClaim ?? actionStorage.claim()
            stored = Self.loadActions(from: actionStorage)
        } catch {
            actionClaim = nil
            stored = ([], [], .notLoaded)
        }
        // A stored queue's actions were made in the history their cursor names: the first socket
        // resumes from there, so a restore that lost it says `reset` before they go (`holdsActions`).
        if let point = QueuedAction.resumePoint(of: stored.actions) {
            machine = StateMachine(policy: configuration.reconnectPolicy, lastEventID: point.eventID, lastCursor: point.cursor)
        }
        actionQueue = ActionQueue(policy: configuration.actionPolicy, actions: stored.actions)
        refused = stored.refused
        actionStorageUnreadable = stored.problem != nil
        storedQueueNotLoaded = stored.problem == .notLoaded
        // Not running yet: held only while it runs (`releaseActionStorage`); `start()` reads it again.
        if actionClaim != nil {
            actionClaim = nil
            if !storedQueueNotLoaded {
                storedQueueNotLoaded = true
                storedQueueIsWhole = true
            }
        }
    }

    /// Whether the storage held a queue this version cannot read (a file storage has set it aside as
    /// `<file>.unreadable`), or could not be read at all when the session was made (then it is read
    /// again before anything is written to it).
    public internal(set) var actionStorageUnreadable: Bool
    /// The storage could not be read when the session was made (I/O, a phone still locked, another
    /// session's claim): what it holds was not loaded, so nothing may be written over it until a
    /// read succeeds.
    var storedQueueNotLoaded: Bool
    /// This session's claim on its storage (``ActionStorage/claim()``), kept while it runs and let
    /// go when it stops (``releaseActionStorage()``).
    var actionClaim: ActionStorageClaim?
    /// The claim the caller gave the session (`init`'s `actionStorageClaim`), used in place of one of
    /// its own until the session stops or is refused (``giveBackCallersClaim()``).
    var callersClaim: ActionStorageClaim?
    /// The caller's claim this session gave back when it stopped: taken again if the session is
    /// started again while no other session took it meanwhile. Weak: the claim locks the file
    /// until it is freed, so a stopped session must not keep it alive after the caller let it go
    /// (the app's next session would be refused the storage; a review, 2026-12-07). Taking it back
    /// is needed only while the caller still holds it.
    weak var givenBackClaim: ActionStorageClaim?

    /// A claim on the storage: the caller's, or a new one.
    /// - Throws: ``ActionStorageInUse`` while another holds it.
    func claimActionStorage() throws -> ActionStorageClaim? {
        if let callersClaim { return callersClaim }
        return try actionStorage.claim()
    }

    /// At ``start()``: takes back the caller's claim this session gave back when it stopped, unless
    /// another session adopted it meanwhile. The caller still holds the file's lock, so a claim of
    /// the session's own is refused for as long as the app runs: a session stopped and started
    /// again (SwiftUI's `.task` as its view goes and comes back) kept no action and sent none of its
    /// queue from then on (a review, 2026-12-07). Only a start takes it back: a stopped session
    /// used for one write must not take the claim from the app's next session.
    func retakeCallersClaim() {
        guard callersClaim == nil, let claim = givenBackClaim, claim.adopt() else { return }
        givenBackClaim = nil
        callersClaim = claim
    }
    /// The storage holds this session's whole queue (it let the storage go after storing it): read
    /// again, it replaces what is in memory instead of going before it.
    var storedQueueIsWhole = false
    /// The last save failed: the storage holds less than memory does.
    var storageBehind = false

    /// The socket's state, for a status line in the app.
    public var connectionState: ConnectionState { machine.state }

    /// How many times the list was declared stale (by events, reconnects, resets or ``refresh()``).
    public var listRevision: Int { list.revision }

    /// The newest event id seen: where the next connection resumes (`?since=`).
    public var lastEventID: EventID? { machine.lastEventID }

    /// The cursor of that event: how the next connection resumes (`?cursor=`), when the server sent one.
    public var lastCursor: ResumeCursor? { machine.lastCursor }

    /// Fetches the list and opens the event socket.
    ///
    /// Calling it again while running does nothing, except after a 4001/4003 stop: then it tries the socket
    /// again (useful when the app believes the refusal was transient; after a new login make a new session).
    public func start() {
        guard !isRunning else {
            perform(machine.start())  // only acts if the socket is stopped
            return
        }
        isRunning = true
        retakeCallersClaim()
        perform(machine.start())
        perform(list.start())
        try? loadStoredQueueIfNeeded()  // a queue that could not be read when the session was made
        sendNextAction()
    }

    /// Closes the socket and stops polling; cached data stays readable. ``start()`` starts again.
    /// It lets the action storage go, so another session over the same file can take it (unless
    /// its caller still holds the claim it gave the session: `actionStorageClaim`).
    public func stop() {
        for waiter in runWaiters { waiter.finish() }
        runWaiters = []
        guard isRunning else {
            releaseActionStorage()  // halted by a refusal (4001), then an action queued: let go all the same
            giveBackCallersClaim()
            return
        }
        isRunning = false
        perform(machine.stop())
        haltWork()
    }

    /// Ends the polling, the refetches and the sending of actions (the queue stays, on disk too).
    /// For ``stop()``, and when the server refused the login (4001/4003, or a REST 401): polling and
    /// retrying with a token it refuses would only collect refusals until the app logs in again.
    func haltWork() {
        isRunning = false
        for task in [backoffTask, coalescingTask, pollTask] { task?.cancel() }
        backoffTask = nil
        coalescingTask = nil
        pollTask = nil
        pollCountdown = nil
        detailRetryAttempt = 0
        _ = coalescer.windowElapsed()
        listTask?.cancel()
        listTask = nil
        list.stopped()
        for (id, task) in detailTasks {
            task.cancel()  // its result is dropped; a joiner of `detail(_:)` still gets it
            detailFetches.forget(id)
        }
        detailTasks = [:]
        stopSendingActions()
        releaseActionStorage()
        giveBackCallersClaim()
    }

    /// The session is done with its caller's claim (it stopped, or the server refused the login):
    /// the app may give it to its next session (after a 4001 and a new login), which it refused
    /// while this one, stopped but still referenced, kept it (a review, 2026-12-05). Kept while the
    /// storage is behind memory (``releaseActionStorage()`` could not let go). Started again, this
    /// session takes the claim back unless another session adopted it (``retakeCallersClaim()``).
    func giveBackCallersClaim() {
        guard let claim = callersClaim, actionClaim == nil else { return }
        claim.disown()
        callersClaim = nil
        givenBackClaim = claim
    }

    /// Starts the session, runs until the calling task is cancelled or ``stop()`` is called, then stops it.
    ///
    /// For structured concurrency: a task group's child, or SwiftUI's `.task { await session.run() }`.
    public func run() async {
        start()
        let (untilCancelled, continuation) = AsyncStream.makeStream(of: Never.self)
        runWaiters.append(continuation)  // `stop()` finishes it; cancellation ends the loop by itself
        for await _ in untilCancelled {}
        stop()
    }

    /// Call when the app returns to the foreground: a socket waiting to retry (or given up) reconnects
    /// now, unless the server asked it to wait (a close with 1008, 1011, 1012 or 1013): then the list
    /// is refetched and the backoff runs its course.
    public func appDidBecomeActive() { wakeUp() }

    /// Call when the network comes back (e.g. from `NWPathMonitor`): as ``appDidBecomeActive()``.
    public func networkDidBecomeAvailable() { wakeUp() }

    private func wakeUp() {
        guard isRunning else { return }
        try? loadStoredQueueIfNeeded()  // the phone was unlocked since: the queue may be readable now
        perform(machine.wakeUp())
        serverLooksReachable()
    }

    /// Marks the list stale and refetches it and every opened detail now (pull to refresh).
    public func refresh() {
        guard isRunning else { return }
        perform(list.bumpRevision())
        for id in openDetails { refreshDetail(id) }
    }
}
