import Synchronization
public import WaybillBroker
public import WaybillDomain
public import WaybillObservability
public import WaybillStorage

/// Hands committed outbox events to the broker, in `event_id` order, after their transaction committed.
///
/// One relay publishes at a time across every node: it runs only while it holds the store's
/// `"outbox-relay"` lease. A node that loses the lease stops and waits to acquire it again; a new
/// leader starts from the persisted `relayedThrough`, so a few events may go out twice, which every
/// feed drops by id. Writes never wait for it: `committed`/`notify` only set a flag. If the broker
/// fails or stalls (each publish is bounded by `publishTimeout`), the events stay in the outbox and
/// the relay retries with backoff from the same cursor; after `stepDownAfterFailures` failed rounds
/// in a row it gives the lease up for `stepDownPause` (1 s), so a node that can reach the broker (or the
/// store) takes over — a leader cut off from Redis alone would otherwise hold every node's live
/// delivery back for as long as it runs. Reading the starting cursor counts the same way: the
/// lease lives on a session of its own, so a node whose reads fail would otherwise keep it.
///
/// Events committed on this node are published without a store read when they continue the cursor
/// (the fast path); events committed on other nodes are found by the leader's poll, so a cluster
/// sets `pollInterval` short (10–20 ms: one indexed range read), while one SQLite process keeps 1 s.
///
/// A history rewound under a leader that keeps its lease (a restore on the same server) would
/// otherwise pass unseen once new commits have gone past the cursor: they continue its *ids*. So
/// the relay checks what it continued (`HistoryCheck`): every slow-path read compares the
/// fingerprints of the events the fast path published without reading the store, and of the one
/// they continued from (else of the cursor's event), and the fast path waits for such a read at
/// least every `historyCheckInterval`. The first event that differs sends the cursor back to just
/// before it, so the new history's event under that id is published: every feed then holds an id
/// it delivered with another fingerprint, reads the store, and closes its sockets (1012) for
/// clients to get `reset`.
public final class OutboxRelay: Sendable {
    public struct Configuration: Sendable {
        public var publishTimeout: Duration = .seconds(2)
        /// How often the leader reads the outbox for events committed by other processes.
        public var pollInterval: Duration = .seconds(1)
        public var batchSize = 512
        /// The longest wait between two failed rounds. Short: the first round after the broker
        /// comes back publishes what waited, and nothing wakes a relay from this wait.
        public var maxBackoff: Duration = .seconds(1)
        /// Failed rounds in a row after which the leader gives the lease up: about 3 s of failing
        /// when the broker refuses at once, up to about 12 s when each publish waits `publishTimeout`.
        public var stepDownAfterFailures = 5
        /// How long a leader that stepped down waits before it tries to take the lease again: long
        /// enough for another node (which tries every 250 ms) to take it, short because a node
        /// alone takes it back after this pause, and relays nothing meanwhile.
        public var stepDownPause: Duration = .seconds(1)
        /// How long a relay whose lease lapsed waits before it asks for it again (a lease that
        /// lapses and is handed straight back must not make the relay spin).
        public var leaseRetryPause: Duration = .milliseconds(250)
        /// How often, at most, the relay cursor is written to the store.
        public var persistInterval: Duration = .milliseconds(100)
        /// On the local path (`delivered`: every event of the round is in this process's hub feed
        /// already, nothing to publish), how often the relay runs a round, saving the cursor in
        /// each. Longer than `persistInterval`: each save is a transaction on the writer thread,
        /// and each round wakes tasks and threads, for nothing any socket waits for. Measured side
        /// by side at 1 000 writes/s, 1 s against 100 ms: about 4 µs less server CPU per write
        /// (docs/BENCHMARKS.md, 2026-12-07 (16:39– UTC)). The cost: the outbox lag reads up to
        /// about a second on a busy node (the events were delivered), and after a crash up to
        /// about a second of events goes out twice, which the feeds drop by id. The pause is at
        /// most `pollInterval`, and counts toward the poll's wait.
        public var deliveredRoundInterval: Duration = .seconds(1)
        /// The longest the fast path goes on without a store read that checks the history it
        /// continued (a rewind under the leader is seen within this; every poll checks too).
        public var historyCheckInterval: Duration = .seconds(1)
        /// The shortest time from the start of a round that published to the start of the next:
        /// commits that arrive meanwhile go out together, one store read and one message for all of
        /// them. Zero (the default; one SQLite process) runs a round as soon as a commit wakes it.
        /// On a shared database (`waybill serve --database-url`) the server sets a few
        /// milliseconds: at 1 000 writes/s over two nodes the leader otherwise ran about 360 rounds
        /// a second, most of them a store read (the other node's commits sit between its own) and a
        /// publish for one or two events, about 0.4 ms of its CPU each (docs/BENCHMARKS.md).
        public var minimumRoundInterval: Duration = .zero

        public init(
            publishTimeout: Duration = .seconds(2), pollInterval: Duration = .seconds(1),
            minimumRoundInterval: Duration = .zero
        ) {
            self.publishTimeout = publishTimeout
            self.pollInterval = pollInterval
            self.minimumRoundInterval = minimumRoundInterval
        }
    }

    /// The lease's name in the store: one relay per cluster.
    public static let leaseName = "outbox-relay"

    private let store: any OrderStore
    private let broker: any Broker
    private let metrics: Metrics
    private let logger: Logger
    private let configuration: Configuration
    private let clock: any Clock<Duration>
    /// Time since the relay was made, on `clock` (an existential clock's instants cannot be subtracted).
    private let elapsed: @Sendable () -> Duration
    private let lease: any Lease
    private let wake = WakeSignal()
    /// Whether this node leads: only then are handed-over events kept.
    private let leading = Atomic<Bool>(false)
    /// Events this process committed, handed over after commit: published without a store read
    /// when they continue the cursor with no gap (the usual case); anything else goes the slow way.
    /// `delivered` ones already reached this node's hub feed (the local path): they only move the
    /// cursor.
    private let handed = Mutex<[(event: StoredEvent, delivered: Bool)]>([])

    public init(
        store: any OrderStore, broker: any Broker, metrics: Metrics, logger: Logger,
        configuration: Configuration = Configuration(), clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.store = store
        self.broker = broker
        self.metrics = metrics
        self.logger = logger
        self.configuration = configuration
        self.clock = clock
        self.elapsed = Self.stopwatch(clock)
        self.lease = store.lease(Self.leaseName)
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    /// Called after each commit. Any thread; never blocks.
    public func notify() { wake.signal() }

    /// Called after each commit of this process with its events. Any thread; never blocks.
    public func committed(_ events: [StoredEvent]) {
        // A follower drops them: the leader's poll finds them in the store.
        if leading.load(ordering: .acquiring) { handed.withLock { for event in events { $0.append((event, false)) } } }
        wake.signal()
    }

    /// Events this process committed that the hub feed already has (`HubFeed.committedHere`, with
    /// an in-process broker): they need no publish, only the cursor moves past them so that the
    /// outbox lag and the next leader see them relayed. Any thread; never blocks.
    ///
    /// Wakes the relay only when nothing was waiting, and a round that only moved the cursor is
    /// followed by a `deliveredRoundInterval` pause, so the relay wakes about once a second
    /// whatever the write rate (one wake per write was the cost this path removes).
    public func delivered(_ events: [StoredEvent]) {
        guard leading.load(ordering: .acquiring) else { return }
        let first = handed.withLock { handed in
            // Appended one by one: a mapped array in between was an allocation per write.
            defer { for event in events { handed.append((event, true)) } }
            return handed.isEmpty
        }
        if first { wake.signal() }
    }

    /// Whether this relay holds the lease and publishes (for tests and logs).
    public var isLeading: Bool { leading.load(ordering: .acquiring) }

    /// Relays whenever this node holds the lease, until the task is cancelled; then gives it up.
    public func run() async {
        while !Task.isCancelled {
            guard await lease.acquire() else { break }
            logger.info("outbox relay leads")
            let steppedDown = await lead()
            leading.store(false, ordering: .releasing)
            handed.withLock { $0.removeAll() }
            guard !Task.isCancelled else { break }
            if steppedDown {
                await lease.release()
                logger.warning(
                    "outbox relay gave up its lease after failing in a row; another node may relay",
                    ["failures": "\(configuration.stepDownAfterFailures)"])
                try? await clock.sleep(for: configuration.stepDownPause)
            } else {
                logger.warning("outbox relay lost its lease; waiting to take it again")
                try? await clock.sleep(for: configuration.leaseRetryPause)
            }
        }
        await lease.release()
    }

    /// Publishes while the lease is held; returns when it is lost or the task is cancelled
    /// (`false`), or when it failed `stepDownAfterFailures` rounds in a row (`true`).
    private func lead() async -> Bool {
        var cursor: EventID
        var history = HistoryCheck()
        switch await initialCursor() {
        case .read(let read, let event):
            cursor = read
            // Checked from the first read on: a restore right after this leader took over would
            // otherwise go unseen until it had published something.
            if let event { history.read(to: event) }
        case .leaseLost: return false
        case .failed: return true
        }
        // Only now are handed-over events kept: until the cursor is known nothing drains them (a
        // leader that cannot read would gather every commit of its node), and events committed
        // before this point are found by the first round's store read.
        leading.store(true, ordering: .releasing)
        var persisted = cursor
        var persistedAt = elapsed()
        var failures = 0
        var saveFailures = FailureStreak()
        // The first round of a leadership, and the first after a failed one, skip a backlog.
        var skipBacklog = true
        while !Task.isCancelled, lease.isHeld {
            do {
                let roundStart = elapsed()
                let round = try await relayAvailable(after: cursor, history: &history, skipBacklog: skipBacklog)
                skipBacklog = false
                let published = round.cursor != cursor && !round.onlyDelivered
                cursor = round.cursor
                failures = 0
                // The cursor is saved at most every `persistInterval` (on the local path, rounds
                // come `deliveredRoundInterval` apart): under load that keeps the relay's own
                // writes off the writer; after a crash a few events go out twice, which the feeds
                // drop by id.
                if cursor != persisted, elapsed() - persistedAt >= configuration.persistInterval {
                    // A save that fails is tried again at the next round, and is not a relay
                    // failure: the events are out already. Counted as one, it cost every node a
                    // 200 ms pause and a backlog read per failed save while the writer was busy,
                    // and said "events stay in the outbox" of published events (found by a review,
                    // 2026-12-05). A relay that keeps its lease but can never save re-sends a few
                    // events after a crash, which the feeds drop by id.
                    do {
                        try await store.write { [cursor] tx in try tx.markRelayed(through: cursor) }
                        persisted = cursor
                        if let failed = saveFailures.succeeded() {
                            logger.info("relay cursor saved again", ["failed_saves": "\(failed)"])
                        }
                    } catch {
                        if saveFailures.failed() {
                            logger.warning(
                                "relay cursor not saved; trying again",
                                ["error": "\(error)", "failed_saves": "\(saveFailures.inARow)"])
                        }
                    }
                    persistedAt = elapsed()
                }
                // An unsaved cursor wakes the relay to save it, but never later than the next poll:
                // other nodes' commits are found only by the poll.
                var timeout =
                    cursor != persisted
                    ? min(configuration.persistInterval, configuration.pollInterval) : configuration.pollInterval
                if round.onlyDelivered {
                    // Let this process's commits gather: their frames are out already. The pause
                    // counts toward the poll's wait: another process's commit (`waybill seed`)
                    // after the last local one waits no longer than `pollInterval` for the store
                    // read that publishes it (found by a review: a pause and then a whole poll
                    // interval made it up to three).
                    let pause = min(configuration.deliveredRoundInterval, configuration.pollInterval)
                    try? await clock.sleep(for: pause)
                    timeout = max(.zero, timeout - pause)
                } else if published, configuration.minimumRoundInterval > .zero {
                    // Let the commits of every node gather for the next round (`minimumRoundInterval`).
                    let rest = configuration.minimumRoundInterval - (elapsed() - roundStart)
                    if rest > .zero { try? await clock.sleep(for: rest) }
                }
                await wake.wait(timeout: timeout, now: elapsed(), clock: clock)
            } catch {
                failures += 1
                skipBacklog = true
                metrics.relayFailed()
                logger.warning("relay failed; events stay in the outbox", ["error": "\(error)", "attempt": "\(failures)"])
                if failures >= configuration.stepDownAfterFailures { break }
                try? await clock.sleep(for: backoff(failures))
            }
        }
        wake.cancelTimer()  // nobody waits any more; on a test clock it would sleep for good
        // What this node's feed delivered since the last round (the local path's pause): the saved
        // cursor goes past it too, so the next start does not publish up to a second of events
        // again (found by a review). Only events that continue the cursor, and only while this
        // node's feed is the broker's one subscriber, as a round would take them.
        let rest = takeHanded(after: cursor)
        if let last = rest.last, rest.allSatisfy(\.delivered), feedIsAlone, Self.continues(cursor, rest.map(\.event)) {
            cursor = last.event.id
        }
        if cursor != persisted, lease.isHeld {
            _ = try? await store.write { [cursor] tx in try tx.markRelayed(through: cursor) }
        }
        return failures >= configuration.stepDownAfterFailures
    }

    /// Where the relay goes on from when it takes a cursor from the store rather than from what it
    /// published (a rewind found, a backlog skipped): one event before it, so the event at `cursor`
    /// goes out again. A feed that delivered exactly through that id from a history rewound since
    /// compares it with what it delivered and resets its sockets; without the overlap the next
    /// event continued that id, the new history was taken for a continuation of the old, and the
    /// sockets kept the lost events with no 1012 (found by a review, 2026-12-05). Feeds drop the
    /// copy otherwise.
    static func restartOverlap(from cursor: EventID) -> EventID {
        EventID(max(0, cursor.rawValue - 1))
    }

    /// The handed-over events after `cursor`, in id order, taken out of the list.
    private func takeHanded(after cursor: EventID) -> [(event: StoredEvent, delivered: Bool)] {
        handed.withLock { handed in
            // Emptied with its room kept (up to 4 096 events: a local round's second of them at
            // 4 000 writes/s; a larger burst's is let go), so the next writes' events go in
            // without an allocation.
            defer { handed.removeAll(keepingCapacity: handed.capacity <= 4096) }
            return handed.filter { $0.event.id > cursor }.sorted { $0.event.id < $1.event.id }
        }
    }

    /// Whether this node's feed is the broker's one subscriber: events it delivered need no
    /// publish. Another server in this process on the same in-process broker has not got them.
    private var feedIsAlone: Bool { (broker.subscriptionCount ?? 2) <= 1 }

    /// Publishes every committed event after `cursor`, batch by batch; returns the new cursor, and
    /// whether the round only moved it past events the hub feed already had.
    private func relayAvailable(
        after cursor: EventID, history: inout HistoryCheck, skipBacklog: Bool = false
    ) async throws -> (cursor: EventID, onlyDelivered: Bool) {
        var cursor = cursor
        let handedOver = takeHanded(after: cursor)
        let now = elapsed()
        if !handedOver.isEmpty, Self.continues(cursor, handedOver.map(\.event)) {
            // Another server in this process on the same in-process broker has not got them: publish
            // everything then (this server's feed drops the copies by id).
            let alone = feedIsAlone
            let unpublished = handedOver.filter { !$0.delivered || !alone }.map(\.event)
            let newest = handedOver.last!.event
            let due = history.isDue(at: now, every: configuration.historyCheckInterval, adding: handedOver.count)
            if unpublished.isEmpty, history.published.isEmpty || !due {
                // The local path: nothing leaves this process, so nothing needs checking later
                // (unless published events wait for a check: then these join them, bounded).
                history.passed(handedOver.map(\.event.cursor), published: false)
                metrics.eventsRelayed(handedOver.count)
                return (newest.id, true)
            }
            // One broker message of at most `batchSize` events, as the slow path sends: a relay
            // held up for seconds hands over thousands, and subscribers refuse a batch past
            // `BrokerWireFormat.maxEvents` (found by a review).
            if !unpublished.isEmpty, unpublished.count <= configuration.batchSize, !due {
                try await publishBounded(unpublished)
                history.passed(handedOver.map(\.event.cursor), published: true)
                metrics.eventsRelayed(handedOver.count)
                return (newest.id, false)
            }
            // A check is due, or too many to send at once: this round goes the slow way (the
            // store has these events too, and is read `batchSize` at a time).
        }
        if skipBacklog {
            // After a broker outage (every publish failed, so the saved cursor stayed put) or a
            // takeover from a stale cursor, the backlog is events every feed already read from the
            // store meanwhile: republishing it batch by batch held new commits behind it, about 1 s
            // per 150 000 events, and every node decoded all of it to drop it (found by a review,
            // 2026-12-04). Only the last batch goes out: ids are dense, so a feed that lacks the
            // skipped ones sees the gap and reads them from the store. It starts one event early
            // (`restartOverlap`): a feed that delivered exactly up to the jump, from a history
            // rewound since, must compare that event, not take the next as its continuation.
            let newest = try await store.urgentRead { tx in try tx.newestEventID() }
            let batch = Int64(configuration.batchSize)
            if newest.rawValue - cursor.rawValue > batch {
                logger.info(
                    "outbox relay skips a backlog the feeds read from the store",
                    ["cursor": "\(cursor)", "newest": "\(newest)"])
                cursor = Self.restartOverlap(from: EventID(newest.rawValue - batch))
            }
        }
        var check = history.unverified
        while !Task.isCancelled, lease.isHeld {
            let after = cursor, limit = configuration.batchSize, checking = check
            let (events, newest, stored) = try await store.urgentRead { tx in
                // What the relay published since its last check (or the cursor's event), as stored
                // now. When that is only the cursor's event, the range read brings it first.
                var stored: [StoredEvent] = [], events: [StoredEvent]
                if checking.count == 1, checking[0].id == after {
                    events = try tx.events(after: EventID(after.rawValue - 1), limit: limit + 1)
                    if events.first?.id == after { stored = [events.removeFirst()] }
                } else {
                    events = try tx.events(after: after, limit: limit)
                    if let first = checking.first {
                        stored = try tx.events(after: EventID(first.id.rawValue - 1), limit: checking.count)
                    }
                }
                return (events, events.isEmpty ? try tx.newestEventID() : nil, stored)
            }
            if let newest, newest < cursor {
                // History rewound (a restore or a failover): ids below the cursor are new events.
                logger.error("outbox history rewound; relaying from the store's newest", ["cursor": "\(cursor)", "newest": "\(newest)"])
                history = HistoryCheck(verifiedAt: now)
                return (Self.restartOverlap(from: newest), false)
            }
            if !checking.isEmpty {
                check = []
                if let changed = HistoryCheck.firstChanged(checking, stored) {
                    // Rewound, and new commits already past what was published: go back to just before
                    // the first event that differs, so its new version reaches every feed.
                    logger.error(
                        "outbox history rewound under the relay; relaying again from the event that changed",
                        ["cursor": "\(cursor)", "changed": "\(changed)"])
                    cursor = EventID(changed.rawValue - 1)
                    history = HistoryCheck(verifiedAt: now)
                    continue
                }
            }
            history.verified(at: now)
            guard let last = events.last else { break }
            try await publishBounded(events)
            metrics.eventsRelayed(events.count)
            cursor = last.id
            history.read(to: last.cursor)
            if events.count < limit { break }
        }
        return (cursor, false)
    }

    /// `broker.publish`, abandoned after `publishTimeout` so a stalled broker cannot hold the relay.
    /// A publish that finishes after its timeout may deliver twice; the feeds drop ids they already have.
    ///
    /// A broker whose publish cannot stall (in-process) is called directly: the two tasks and the
    /// timer of the bounded path cost more than the publish itself, once per relayed batch
    /// (docs/BENCHMARKS.md, "Fewer wake-ups per write").
    private func publishBounded(_ events: [StoredEvent]) async throws {
        let broker = self.broker, timeout = configuration.publishTimeout, clock = self.clock
        if broker.publishNeverStalls {
            try await broker.publish(events)
            return
        }
        let outcome = Mutex<CheckedContinuation<Void, any Error>?>(nil)
        let timer = Mutex<Task<Void, Never>?>(nil)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            outcome.withLock { $0 = continuation }
            let finish: @Sendable (Result<Void, any Error>) -> Void = { result in
                outcome.withLock { $0.take() }?.resume(with: result)
            }
            let publishing = Task { finish(await Result { try await broker.publish(events) }) }
            timer.withLock {
                $0 = Task {
                    guard (try? await clock.sleep(for: timeout)) != nil else { return }  // cancelled: published in time
                    publishing.cancel()
                    finish(.failure(BrokerError("publish timed out")))
                }
            }
        }
        timer.withLock { $0?.cancel() }
    }

    /// What the relay knows of the history its cursor continues, and what it has not checked yet.
    ///
    /// Every event published by the fast path (this process's commits, unread) waits here until a
    /// store read compares it: a restore may have happened under any of them, and commits made after
    /// it continue the ids. The events are contiguous (the fast path only continues the cursor),
    /// at most `maxUnverified`: the feeds remember more than that (`FeedSequencer.recentCount`), so
    /// every id the relay may go back to is one they can compare.
    struct HistoryCheck {
        /// The cursor's event as the relay saw it (`nil`: taken from the store's record).
        private(set) var last: EventCursor?
        /// Events published without a store read since the last check, ascending, contiguous, after
        /// the event the first of them continued (`published[0]`, checked too: the restore may lie
        /// right under the first of them).
        private(set) var published: [EventCursor] = []
        /// When the last check was made (`nil`: none yet as leader).
        private(set) var verifiedAt: Duration?

        static let maxUnverified = 2_048

        init(verifiedAt: Duration? = nil) { self.verifiedAt = verifiedAt }

        /// What the next store read compares: the published events and the one they continued,
        /// else the cursor's event.
        var unverified: [EventCursor] { published.isEmpty ? (last.map { [$0] } ?? []) : published }

        /// Whether the fast path must wait for a store read: the last check is `interval` old, or
        /// with `adding` more, more events than the feeds can compare would wait for one.
        func isDue(at now: Duration, every interval: Duration, adding: Int = 0) -> Bool {
            guard let verifiedAt, published.count + adding <= Self.maxUnverified else { return true }
            return now - verifiedAt >= interval
        }

        /// The cursor moved past `events` without a store read; `published`: they went to the broker.
        mutating func passed(_ events: [EventCursor], published sent: Bool) {
            // Unpublished ones join the list only to keep it contiguous behind published ones.
            if sent || !published.isEmpty {
                if published.isEmpty, let last { published = [last] }
                published += events
            }
            last = events.last ?? last
        }

        /// Events up to `newest` were read from the store.
        mutating func read(to newest: EventCursor) { last = newest }

        mutating func verified(at now: Duration) {
            published = []
            verifiedAt = now
        }

        /// The first of `expected` whose id the store holds with another fingerprint (`stored`: the
        /// store's events from the first expected id on); an id the store no longer has (pruned)
        /// cannot be compared and counts as unchanged.
        static func firstChanged(_ expected: [EventCursor], _ stored: [StoredEvent]) -> EventID? {
            guard let first = expected.first else { return nil }
            for event in stored {
                let offset = Int(event.id.rawValue - first.id.rawValue)
                guard offset >= 0, offset < expected.count else { continue }
                if !expected[offset].matches(event) { return event.id }
            }
            return nil
        }
    }

    /// Whether `events` (sorted) are exactly the ids after `cursor`, with no gap.
    public static func continues(_ cursor: EventID, _ events: [StoredEvent]) -> Bool {
        var expected = cursor.rawValue + 1
        for event in events {
            guard event.id.rawValue == expected else { return false }
            expected += 1
        }
        return true
    }

    private enum InitialCursor {
        /// The cursor, and its event as the store has it (if it still has it).
        case read(EventID, EventCursor?)
        /// The lease was lost or the task cancelled first.
        case leaseLost
        /// `stepDownAfterFailures` reads in a row failed: this node cannot relay, another may.
        case failed
    }

    /// The persisted cursor, or the store's newest if that is lower (history rewound under it).
    ///
    /// Failures count toward stepping down as a round's do: the lease lives on a session of its own,
    /// so a node whose reads fail (its pool out of connection slots, its read queue full) would
    /// otherwise hold it for good, and no node would relay.
    private func initialCursor() async -> InitialCursor {
        var failures = 0
        while !Task.isCancelled, lease.isHeld {
            do {
                let (relayed, newest, event) = try await store.urgentRead { tx in
                    let relayed = try tx.relayedThrough(), newest = try tx.newestEventID()
                    let cursor = min(relayed, newest)
                    return (relayed, newest, cursor == .zero ? nil : try tx.event(cursor))
                }
                if relayed > newest {
                    logger.error("relay cursor above the newest event; relaying from the newest", ["relayed": "\(relayed)", "newest": "\(newest)"])
                }
                return .read(min(relayed, newest), event?.cursor)
            } catch {
                failures += 1
                metrics.relayFailed()
                logger.warning("relay cannot read its cursor", ["error": "\(error)", "attempt": "\(failures)"])
                if failures >= configuration.stepDownAfterFailures { return .failed }
                try? await clock.sleep(for: backoff(failures))
            }
        }
        return .leaseLost
    }

    private func backoff(_ failures: Int) -> Duration { Self.backoff(failures, max: configuration.maxBackoff) }

    /// 100 ms doubled per failure, at most `max`. The cap counts its milliseconds: whole seconds
    /// made any cap under a second 0, a retry with no pause (found by a review, 2026-12-07).
    static func backoff(_ failures: Int, max: Duration) -> Duration {
        .milliseconds(min(100 << min(failures, 10), Int(clamping: max.milliseconds)))
    }
}

extension Result where Failure == any Error {
    init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
