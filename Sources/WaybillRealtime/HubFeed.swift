public import WaybillBroker
public import WaybillDomain
public import WaybillObservability
public import WaybillStorage
import Synchronization

/// Moves events from the broker subscription (and, when it falls short, the store) to the hub.
///
/// One task runs a `FeedSequencer` and performs its steps; inputs (broker deliveries and poll
/// ticks) arrive on one stream. On the local path the store's writer thread steps it too
/// (`committedHere`), so it sits behind a lock that no store call or `await` is ever made under.
/// The target's `deliver` runs under that lock, on either thread: it must only queue, never block. A lost broker subscription does
/// not close sockets: the feed reads new events from the store every `pollInterval` until the
/// broker is back and has delivered a batch: the relay's publisher may come back later than the
/// subscription (docs/DESIGN.md, "Hub feed").
public final class HubFeed: Sendable {
    public struct Configuration: Sendable {
        /// How often the store is read while the broker is down (and pending gaps are retried).
        public var pollInterval: Duration = .milliseconds(100)
        /// How often, while the broker delivers, the store is checked for a rewound history.
        public var historyCheckInterval: Duration = .seconds(5)
        /// Events per store read.
        public var readLimit = 512
        /// Broker deliveries and ticks waiting for the feed (it falls behind while a store read is
        /// slow). Past it the oldest is dropped: a dropped batch is a gap the next read fills.
        public var maxPendingInputs = 4096
        public init() {}
    }

    private enum Input: Sendable {
        case delivery(BrokerDelivery)
        case tick
        /// Events committed here left a read owed (a gap): do it now, not at the next tick.
        case readOwed
    }

    /// What the feed task and the commit path (`committedHere`) share. The sequencer is stepped
    /// and its steps performed under the lock, so events reach the hub in id order whoever
    /// brought them; store reads run outside it.
    private struct Shared {
        var sequencer: FeedSequencer?
        /// Committed before `run` started: given to the sequencer first.
        var early: [StoredEvent] = []
        var wake: AsyncStream<Input>.Continuation?
        var dropped: DroppedInputs?
        /// A `.readOwed` is queued and not yet handled: one wake-up is enough.
        var woken = false
        /// `run` ended: later commits are nobody's (a stopped server).
        var stopped = false
    }

    private let broker: any Broker
    private let store: any OrderStore
    private let target: any FeedTarget
    private let metrics: Metrics
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let configuration: Configuration
    private let shared = Mutex(Shared())
    /// Store reads failed in a row (only `run`'s loop touches it). While the broker and the store
    /// are both down the feed polls every 100 ms: the first failure is logged, then every 100th,
    /// and the first success after them (a line per poll buried every other line of the log).
    private let failedReads = Mutex(FailureStreak())

    public init(
        broker: any Broker, store: any OrderStore, target: any FeedTarget, metrics: Metrics, logger: Logger,
        clock: any Clock<Duration> = ContinuousClock(), configuration: Configuration = Configuration()
    ) {
        self.broker = broker
        self.store = store
        self.target = target
        self.metrics = metrics
        self.logger = logger
        self.clock = clock
        self.configuration = configuration
    }

    /// The store's newest cursor: where a feed (and the hub) start.
    public static func newestCursor(in store: any OrderStore) async throws -> EventCursor {
        try await store.read { tx in try Self.newestCursor(tx) }
    }

    /// Events this process just committed, in id order: the store's commit observer calls it on
    /// its writer thread, so with an in-process broker events reach the hub without the relay →
    /// broker → feed task hand-offs (docs/DESIGN.md, "The local path"). Never blocks: the
    /// hub only queues the frames for its thread. A gap (another process committed in between)
    /// wakes the feed task to read the store; duplicates of what the broker brings are dropped by id.
    public func committedHere(_ events: [StoredEvent]) {
        withStep { shared in
            guard !shared.stopped else { return nil }
            guard shared.sequencer != nil else {
                shared.early += events
                return nil
            }
            let step = shared.sequencer!.received(events)
            // One wake-up per owed read, not one per commit while it is owed (a failing store would
            // otherwise be read once per commit instead of once per tick).
            if shared.sequencer!.owedRead != nil, !shared.woken, let wake = shared.wake, let dropped = shared.dropped {
                shared.woken = true
                forward(.readOwed, into: wake, dropped: dropped)
            }
            return step
        }
    }

    /// Whether the feed polls while it waits for a delivering broker batch, with no store read owed
    /// or in flight (`FeedSequencer.awaitingBrokerBatch`; tests wait for it).
    public var isAwaitingBrokerBatch: Bool {
        shared.withLock { shared in
            guard let sequencer = shared.sequencer, !shared.stopped else { return false }
            return sequencer.awaitingBrokerBatch && sequencer.owedRead == nil
        }
    }

    /// Whether `run` has started and not ended (tests wait for it).
    public var isRunning: Bool { shared.withLock { $0.sequencer != nil && !$0.stopped } }

    /// Whether the feed follows the broker with no store read owed or in flight (tests wait for it
    /// before changing the store under it: a read still to come would see the change).
    public var isQuiet: Bool {
        shared.withLock { shared in
            guard let sequencer = shared.sequencer, !shared.stopped else { return false }
            return sequencer.mode == .broker && sequencer.owedRead == nil
        }
    }

    /// Feeds until cancelled, starting after `start`. `first` is a subscription taken before
    /// `start` was read, so nothing committed after it is missed.
    public func run(first: AsyncStream<BrokerDelivery>, startingAfter start: EventCursor) async {
        let (inputs, input) = AsyncStream.makeStream(
            of: Input.self, bufferingPolicy: .bufferingNewest(configuration.maxPendingInputs))
        let dropped = DroppedInputs()
        let ticks = Int(configuration.historyCheckInterval / configuration.pollInterval)
        withStep { shared in
            var sequencer = FeedSequencer(deliveredThrough: start, ticksPerCheck: ticks)
            let step = shared.early.isEmpty ? nil : sequencer.received(shared.early)
            shared.early = []
            shared.sequencer = sequencer
            shared.wake = input
            shared.dropped = dropped
            return step
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.subscribe(first: first, into: input, dropped: dropped) }
            group.addTask { await self.tick(into: input, dropped: dropped) }
            for await next in inputs {
                // Inputs were dropped (maybe a batch, `.lost` or `.subscribed`): go by the broker's
                // state the forwarder saw last, and read the store once to fill whatever is missing.
                let lastSeen = dropped.take()
                // The `.readOwed` that clears `woken` was dropped: left set, no local commit would
                // wake the feed again for a gap, only the ticks (found by a review, 2026-12-05). The
                // reads owed are done below either way. (Only then: cleared after any drop, a full
                // queue took a new wake-up per commit, each pushing out another input.)
                if dropped.takeWakeUpDropped() { shared.withLock { $0.woken = false } }
                // A `.lost` dropped too: the outage is news to the sequencer, and the `.subscribed`
                // after it must still wait for a delivering batch (the publisher may come back later).
                let lostDropped = dropped.takeLostDropped()
                update { sequencer in
                    switch lastSeen {
                    case .subscribed?:
                        if lostDropped { sequencer.lost() }
                        sequencer.subscribed()
                    case .lost?: sequencer.lost()
                    case .events?, .skipped?, nil: break
                    }
                    if lastSeen != nil { sequencer.inputsDropped() }
                }
                await handle(next)
            }
            group.cancelAll()
        }
        shared.withLock { shared in
            shared.wake = nil
            shared.sequencer = nil
            shared.stopped = true
        }
    }

    /// Runs `body` under the lock and performs the step it returns there, still under it (its
    /// deliveries stay in id order whoever calls); its log lines go out after the lock is released.
    private func withStep(_ body: (inout Shared) -> FeedSequencer.Step?) {
        let performed: FeedSequencer.Step? = shared.withLock { shared in
            guard let step = body(&shared) else { return nil }
            perform(step)
            return step
        }
        if let performed { log(performed) }
    }

    /// Runs `body` on the sequencer (if the feed runs) and performs the step it returns (`withStep`).
    private func step(_ body: (inout FeedSequencer) -> FeedSequencer.Step?) {
        withStep { shared in shared.sequencer == nil ? nil : body(&shared.sequencer!) }
    }

    /// Changes the sequencer under the lock (nothing to deliver).
    private func update(_ body: (inout FeedSequencer) -> Void) {
        step { (sequencer: inout FeedSequencer) -> FeedSequencer.Step? in
            body(&sequencer)
            return nil
        }
    }

    private func handle(_ input: Input) async {
        switch input {
        case .delivery(.events(let batch)):
            step { $0.received(batch) }
        case .delivery(.lost):
            logger.warning("broker subscription lost; reading new events from the store until it is back")
            update { $0.lost() }
        case .delivery(.subscribed):
            var wasLost = false
            update { sequencer in
                wasLost = sequencer.mode == .polling && sequencer.hasBeenSubscribed
                sequencer.subscribed()
            }
            if wasLost { logger.info("broker subscription back") }  // not under the lock: logging may block
        case .delivery(.skipped):
            update { $0.batchSkipped() }
        case .tick:
            update { $0.tick() }
        case .readOwed:
            shared.withLock { $0.woken = false }
        }
        // A full page asks for the next at once; a failed read waits for the next tick.
        while !Task.isCancelled,
            let (kind, issuedAt, doubted) = shared.withLock({ shared in shared.sequencer?.takeRead() })
        {
            let after = issuedAt.id, limit = kind == .events ? configuration.readLimit : 0
            do {
                let read = try await store.urgentRead { tx in
                    let events = limit > 0 ? try tx.events(after: after, limit: limit) : []
                    let atDelivered = after == .zero ? nil : try tx.event(after)
                    return FeedSequencer.StoreRead(
                        events: events, isFull: limit > 0 && events.count >= limit, newest: try Self.newestCursor(tx),
                        atDelivered: atDelivered, issuedAt: issuedAt, kind: kind,
                        atDoubted: try doubted.flatMap { $0 == after ? atDelivered : try tx.event($0) })
                }
                metrics.feedReadStore()
                if let failed = failedReads.withLock({ $0.succeeded() }) {
                    logger.info("feed store reads work again", ["failed_reads": "\(failed)"])
                }
                step { $0.storeRead(read) }
            } catch {
                let (log, failed) = failedReads.withLock { streak in (streak.failed(), streak.inARow) }
                if log { logger.warning("feed store read failed; retrying", ["error": "\(error)", "failed_reads": "\(failed)"]) }
                update { $0.storeReadFailed() }
            }
        }
    }

    /// Under the lock: what must happen in order with other steps (never a log line: a logger's
    /// sink may block, as the standard one did before `LogWriter`, and every commit of the node
    /// waits for this lock).
    private func perform(_ step: FeedSequencer.Step) {
        if let newest = step.rewound {
            metrics.historyRewound()
            target.historyRewound(to: newest)
        }
        if !step.deliver.isEmpty { target.deliver(step.deliver) }
    }

    /// After the lock: what the step says in the log.
    private func log(_ step: FeedSequencer.Step) {
        switch step.brokerSilence {
        case true?:
            logger.warning(
                "the broker brought nothing while the store moved on (two checks): reading the store every tick until it does (a relay leader frozen or cut off from Redis, or nodes on different Redis servers or channels)")
        case false?: logger.info("the broker delivers again")
        case nil: break
        }
        if step.discarded > 0 {
            logger.warning(
                "dropped broker events the store never had (a stale copy, or a foreign message on the channel)",
                ["count": "\(step.discarded)"])
        }
        if let newest = step.rewound {
            logger.error("store history rewound; closing sockets so clients resume", ["newest": "\(newest)"])
        }
    }

    /// Forwards broker deliveries. A subscription that ends (it should reconnect by itself) counts
    /// as lost and is replaced after a backoff, so a broken broker cannot stop live delivery for good.
    private func subscribe(
        first: AsyncStream<BrokerDelivery>, into input: AsyncStream<Input>.Continuation, dropped: DroppedInputs
    ) async {
        var subscription = first
        var pause = Duration.milliseconds(100)
        while !Task.isCancelled {
            var received = false
            for await delivery in subscription {
                received = received || delivery != .lost
                if delivery == .lost || delivery == .subscribed { dropped.brokerIs(delivery) }
                forward(.delivery(delivery), into: input, dropped: dropped)
            }
            guard !Task.isCancelled else { break }
            dropped.brokerIs(.lost)
            forward(.delivery(.lost), into: input, dropped: dropped)
            pause = received ? .milliseconds(100) : min(pause * 2, .seconds(5))
            do { try await clock.sleep(for: pause) } catch { break }
            subscription = broker.subscribe()
        }
        input.finish()
    }

    private func tick(into input: AsyncStream<Input>.Continuation, dropped: DroppedInputs) async {
        while !Task.isCancelled {
            do { try await clock.sleep(for: configuration.pollInterval) } catch { break }
            forward(.tick, into: input, dropped: dropped)
        }
        input.finish()
    }

    private func forward(_ next: Input, into input: AsyncStream<Input>.Continuation, dropped: DroppedInputs) {
        if case .dropped(let old) = input.yield(next) {
            metrics.overflowed(.feedInputs)
            dropped.noteDrop()
            if case .readOwed = old { dropped.noteWakeUpDropped() }
            if case .delivery(.lost) = old { dropped.noteLostDropped() }
        }
    }

    static func newestCursor(_ tx: any StoreReader) throws -> EventCursor {
        let id = try tx.newestEventID()
        if id == .zero { return .origin }
        return try tx.event(id)?.cursor ?? EventCursor(id: id, check: EventCursor.origin.check)
    }
}
