public import WaybillDomain

/// Decides what the hub gets from broker batches and store reads: every event once, in id order,
/// with no gap, whatever the broker does (SPEC §6, "Failure contract").
///
/// Event ids are dense (one counter, taken at commit), so a batch that does not start right after
/// `deliveredThrough` shows that something went missing; the store has it. The feed owns one
/// sequencer, feeds it what happened and performs the returned `Step` (deliver, read the store);
/// the rules are tested on plain values (Tests/WaybillRealtimeTests/FeedSequencerTests).
///
/// - Duplicates (a republishing relay, an overlap after a store read) are dropped by id.
/// - Broker events the store does not have in a snapshot taken after they arrived are dropped: an
///   event reaches the broker only after it commits, so they were never committed here (a stale
///   copy, or someone else's message on the channel).
/// - A gap keeps the batch pending and asks for a store read of `events(after: deliveredThrough)`;
///   the store's answer is authoritative, so a failed read only delays (never drops) delivery.
/// - Until the broker subscription is up, and while it is lost, every tick asks for a store read
///   (short poll); after `.subscribed`, one read closes what was published in between. Up before
///   the first tick, the broker is trusted at once; after it was down, polling goes on until a broker
///   batch delivers (the relay's publisher may reconnect later than the subscription), for at most
///   `maxTicksAwaitingBatch` ticks. A feed starts polling: a broker that never comes up (Redis down
///   at startup) never says `.subscribed` — nor `.lost`.
/// - A periodic check that finds the store ahead of `deliveredThrough` reads the events: a broker
///   that is subscribed but never gets them (the relay's leader cannot reach it) delays delivery by
///   at most one check interval instead of stopping it. Two such checks in a row with no
///   delivering batch between (`brokerSilent`: nodes on different Redis servers, a frozen leader)
///   switch the feed to polling until a batch delivers again.
/// - A message the broker could not read (`batchSkipped`) asks for a store read at once, at most
///   one per tick.
/// - Every read also reports the store's newest event and the event at `deliveredThrough`: if the
///   newest id went below it, or that event now has another fingerprint, history rewound (a restore
///   or a failover) and the step says so; delivery restarts from the store's newest cursor. A broker
///   batch that carries the id of a recently delivered event (`recentCount`) with another
///   fingerprint holds delivery until a store read of that id has decided (the broker may be
///   re-sending a rewound history, or an old copy). The id need not be `deliveredThrough`'s: a relay
///   that finds the history rewound under events it already published goes back to the event that
///   changed (`OutboxRelay`), below what the feed delivered since.
public struct FeedSequencer: Sendable {
    /// What a store read is for.
    public enum ReadKind: Equatable, Sendable {
        /// New events after `deliveredThrough` (a gap, polling, resubscribed), plus the history check.
        case events
        /// Only the history check (periodic while the broker delivers): events are left to the broker.
        case check
    }

    public enum Mode: Equatable, Sendable {
        /// The broker delivers; the store is read only to fill a gap (and for the periodic check).
        case broker
        /// The broker subscription is not up (not yet, or lost), or is back and has not delivered
        /// yet (`awaitingBrokerBatch`), or is silent (`brokerSilent`): the store is read on every tick.
        case polling
    }

    /// What one store read found (all in one snapshot).
    public struct StoreRead: Sendable, Equatable {
        /// `events(after: deliveredThrough, limit:)`.
        public var events: [StoredEvent]
        /// Whether `events` reached the read's limit (more may follow at once).
        public var isFull: Bool
        /// The store's newest event (its cursor; `.origin` for an empty store).
        public var newest: EventCursor
        /// The store's event with the id of `issuedAt`, if it still exists.
        public var atDelivered: StoredEvent?
        /// The store's event with the id `takeRead` named as doubted, if any and if it still exists.
        public var atDoubted: StoredEvent?
        /// `deliveredThrough` when the read was asked for (`nil`: unchanged since). Events committed
        /// in this process reach the sequencer while a read is in flight (`received`), so by the
        /// time it answers `deliveredThrough` may be past the read's snapshot; history is compared
        /// with what was delivered when the read began, or a newer delivery would look like a rewind.
        public var issuedAt: EventCursor?
        /// What the read was for: a `.check` reads no events.
        public var kind: ReadKind

        public init(
            events: [StoredEvent], isFull: Bool, newest: EventCursor, atDelivered: StoredEvent?,
            issuedAt: EventCursor? = nil, kind: ReadKind = .events, atDoubted: StoredEvent? = nil
        ) {
            self.atDoubted = atDoubted
            self.events = events
            self.isFull = isFull
            self.newest = newest
            self.atDelivered = atDelivered
            self.issuedAt = issuedAt
            self.kind = kind
        }
    }

    /// What the feed does next.
    public struct Step: Sendable, Equatable {
        /// Hand these to the hub, in this order.
        public var deliver: [StoredEvent] = []
        /// History rewound: close every socket with 1012; delivery continues after this cursor.
        public var rewound: EventCursor?
        /// Broker events dropped because the store, read after they arrived, has no such ids (to log).
        public var discarded: Int
        /// The broker went silent (`true`: see `brokerSilent`) or delivers again (`false`), to log.
        public var brokerSilence: Bool?
        public init(deliver: [StoredEvent] = [], rewound: EventCursor? = nil, discarded: Int = 0, brokerSilence: Bool? = nil) {
            self.deliver = deliver
            self.rewound = rewound
            self.discarded = discarded
            self.brokerSilence = brokerSilence
        }
    }

    /// The highest contiguous event handed to the hub.
    public private(set) var deliveredThrough: EventCursor
    public private(set) var mode: Mode = .polling
    /// `.subscribed` came at least once (a later `.polling` is a lost subscription, not a first one).
    public private(set) var hasBeenSubscribed = false
    /// What the feed should read from the store now, if anything.
    public private(set) var owedRead: ReadKind?
    /// A read of events failed: the next tick asks again even with nothing pending.
    private var retryEvents = false
    /// A broker batch named a delivered id with another fingerprint (or inputs were dropped):
    /// nothing is delivered until a store read says whether history rewound.
    public private(set) var awaitingHistoryCheck = false
    /// The delivered event a broker batch named with another fingerprint (the lowest such), which
    /// the doubt's store read compares; `doubtedWhenTaken` is what the read in flight was asked for.
    private var doubted: EventCursor?
    private var doubtedWhenTaken: EventCursor?
    /// The cursors of the last `recentCount` delivered events, at `id % recentCount` (delivered ids
    /// are dense). About a second of events at the highest write rate measured; an older id named
    /// again cannot be compared and is dropped as a duplicate, as every id was before.
    private var recent: [EventCursor?]
    public static let recentCount = 4_096
    /// A read was taken (`takeRead`) since the doubt arose: only its answer settles it (one read is in
    /// flight at a time, and one issued before the batch may predate a failover).
    private var doubtReadIssued = false
    /// Broker events above a gap, ascending, waiting for the store read that fills it.
    private var pending: [StoredEvent] = []
    /// The highest pending id when the read in flight was taken: the read's snapshot is newer than
    /// every event pending then (an event is published, or observed here, only after it commits).
    private var pendingWhenTaken: EventID?
    private var ticksSinceCheck = 0
    private let ticksPerCheck: Int
    /// Subscribed, yet two checks in a row found the store ahead with no broker batch since the
    /// check before: the broker delivers nothing to this node (its `--redis-url` names another
    /// Redis than the leader's, say). It polls the store as if lost until a batch comes. Before, a
    /// PUBLISH that reached no one counted as success and this node delivered only at every 5 s
    /// check, with no end (found by a review, 2026-12-05).
    public private(set) var brokerSilent = false
    /// Subscribed after the broker was down (the subscription lost, or not up yet at the first
    /// tick): the store is read on every tick, as while it was down, until a broker batch delivers. The
    /// subscription comes back on its own backoff and the relay's publisher on another (up to 2 s
    /// after a long outage); until the publisher is back nothing is published, and a feed that
    /// trusted the subscription alone delivered nothing but its own commits until the publisher
    /// (or two 5 s checks) came. Measured with `scripts/bench.sh cluster paced 1000 20 redis`:
    /// Redis restarted, the subscriptions back at once, the publisher 1.2 s later, and every
    /// socket's delivery p99 1 s in that run (docs/BENCHMARKS.md, 2026-12-05 15:18).
    public private(set) var awaitingBrokerBatch = false
    /// The broker was down since the last `.subscribed`: lost, or not subscribed yet at a tick.
    private var brokerWasDown = false
    /// Ticks left before the wait for a delivering batch ends anyway: an idle cluster has nothing
    /// to publish, and would otherwise poll until its next write (maybe hours; a review found it).
    /// 5 s: more than the publisher's longest backoff (2 s). After it, the periodic check and
    /// `brokerSilent` cover a broker that still brings nothing.
    private var ticksAwaitingBatch = 0
    public static let maxTicksAwaitingBatch = 50
    /// Broker batches since the last check's answer, and checks in a row that found the store
    /// ahead with none.
    private var batchesSinceCheck = 0
    private var silentChecks = 0
    /// A skipped message asked for a read since the last tick; another one asks at the next tick.
    private var skippedThisTick = false
    private var skipOwed = false
    private let maxPending: Int

    /// - Parameters:
    ///   - deliveredThrough: where delivery starts (the store's newest cursor at startup).
    ///   - ticksPerCheck: ticks between history checks while the broker delivers (e.g. 5 s / 100 ms).
    ///   - maxPending: broker events kept above a gap; past it they are dropped and read from the store.
    public init(deliveredThrough: EventCursor, ticksPerCheck: Int = 50, maxPending: Int = 10_000) {
        self.deliveredThrough = deliveredThrough
        self.ticksPerCheck = max(1, ticksPerCheck)
        self.maxPending = maxPending
        recent = []
        rememberOnly(deliveredThrough)
    }

    /// A batch from the broker, or events this process just committed (in id order).
    public mutating func received(_ batch: [StoredEvent]) -> Step {
        var step: Step
        if pending.isEmpty, !awaitingHistoryCheck, continues(batch) {
            // The usual batch (a commit of this process, or the broker's next one): delivered as it
            // came, without the pending list's copies (a write's share of the feed's CPU).
            markDelivered(batch[...])
            step = Step(deliver: batch)
        } else {
            step = receivedOutOfLine(batch)
        }
        // Only a batch that continues what was delivered proves the broker brings this node's
        // events: a foreign one (another deployment's Redis on the same channel) never does.
        if !step.deliver.isEmpty {
            batchesSinceCheck += 1
            silentChecks = 0
            if awaitingBrokerBatch {
                awaitingBrokerBatch = false
                mode = .broker
            }
            if brokerSilent {
                brokerSilent = false
                mode = .broker
                step.brokerSilence = false
            }
        }
        if !pending.isEmpty || awaitingHistoryCheck { owedRead = .events }  // a gap, or history in doubt
        if pending.count > maxPending { pending = [] }  // the store has them all; memory stays bounded
        return step
    }

    /// Whether `batch` is not empty and its ids go on one by one from `deliveredThrough`.
    private func continues(_ batch: [StoredEvent]) -> Bool {
        var next = deliveredThrough.id.rawValue + 1
        for event in batch {
            guard event.id.rawValue == next else { return false }
            next += 1
        }
        return !batch.isEmpty
    }

    /// `received` for a batch that does not simply continue delivery: ids already delivered (a copy,
    /// or a rewound history), a gap before it, or events pending above an earlier gap.
    private mutating func receivedOutOfLine(_ batch: [StoredEvent]) -> Step {
        for event in batch where event.id <= deliveredThrough.id {
            guard let known = remembered(event.id), !known.matches(event) else { continue }
            awaitingHistoryCheck = true
            if doubted.map({ known.id < $0.id }) ?? true {
                // A read already in flight did not look at this id: only one taken from now on
                // settles it. The same doubt again (a relay re-sending its batches) changes nothing,
                // or a stream of copies would hold delivery read after read.
                doubted = known
                doubtReadIssued = false
            }
            break
        }
        addPending(batch.filter { $0.id > deliveredThrough.id })
        return Step(deliver: awaitingHistoryCheck ? [] : drainPending())
    }

    /// The broker subscription dropped: read the store now and on every tick until `.subscribed`.
    public mutating func lost() {
        mode = .polling
        owedRead = .events
        awaitingBrokerBatch = false
        brokerWasDown = true
        forgetSilence()
    }

    private mutating func forgetSilence() {
        brokerSilent = false
        silentChecks = 0
        batchesSinceCheck = 0
    }

    /// Subscribed: one store read closes what was published while it was down. Up at the start,
    /// the broker delivers from now on; after it was down (`lost()`, or still not subscribed at a
    /// tick), the store is still read on every tick until a broker batch delivers
    /// (`awaitingBrokerBatch`).
    /// Said again while waiting (a replay after dropped inputs), the wait goes on.
    public mutating func subscribed() {
        hasBeenSubscribed = true
        owedRead = .events
        forgetSilence()
        if brokerWasDown {
            awaitingBrokerBatch = true
            ticksAwaitingBatch = Self.maxTicksAwaitingBatch
        }
        brokerWasDown = false
        mode = awaitingBrokerBatch ? .polling : .broker
    }

    /// The feed dropped inputs (its queue was full). A dropped batch may have been the only one that
    /// named the delivered event's id with another fingerprint (a rewind under this node): the next
    /// batch cannot be trusted to continue the delivered history by its ids alone. Nothing is
    /// delivered until a store read, taken from now on, has compared the history.
    public mutating func inputsDropped() {
        awaitingHistoryCheck = true
        doubtReadIssued = false
        owedRead = .events
    }

    /// The broker could not read a message (`BrokerDelivery.skipped`): it may have held events, so
    /// the store is read now (a read already owed covers it).
    /// At most one such read per tick: a stream of unreadable messages (a newer leader in a rolling
    /// upgrade, hundreds a second) would otherwise cost a store read each.
    public mutating func batchSkipped() {
        if skippedThisTick {
            skipOwed = true
        } else {
            skippedThisTick = true
            if owedRead == nil { owedRead = .events }
        }
    }

    /// The poll interval passed.
    public mutating func tick() {
        ticksSinceCheck += 1
        if !hasBeenSubscribed { brokerWasDown = true }
        if awaitingBrokerBatch {
            ticksAwaitingBatch -= 1
            if ticksAwaitingBatch <= 0 {
                awaitingBrokerBatch = false
                mode = .broker
            }
        }
        skippedThisTick = false
        if skipOwed {
            skipOwed = false
            skippedThisTick = true
            if owedRead == nil { owedRead = .events }
        }
        if mode == .polling || !pending.isEmpty || retryEvents || awaitingHistoryCheck {
            owedRead = .events
        } else if ticksSinceCheck >= ticksPerCheck, owedRead == nil {
            owedRead = .check
        }
    }

    /// The feed starts the read it owes: what to read, and the cursor to read after. The feed
    /// reads one at a time and answers with `storeRead` or `storeReadFailed`.
    public mutating func takeRead() -> (kind: ReadKind, after: EventCursor, doubted: EventID?)? {
        guard let owedRead else { return nil }
        if awaitingHistoryCheck { doubtReadIssued = true }
        pendingWhenTaken = pending.last?.id
        doubtedWhenTaken = doubted
        return (owedRead, deliveredThrough, doubted?.id)
    }

    /// A store read answered. The store is the truth: what it has after `deliveredThrough` is
    /// delivered, then whatever pending broker events continue it.
    public mutating func storeRead(_ read: StoreRead) -> Step {
        ticksSinceCheck = 0
        let takenWith = pendingWhenTaken, doubtedThen = doubtedWhenTaken
        pendingWhenTaken = nil
        doubtedWhenTaken = nil
        if Self.hasRewound(from: read.issuedAt ?? deliveredThrough, to: read)
            || Self.differs(doubtedThen, from: read.atDoubted) || Self.skipsPast(deliveredThrough, in: read)
        {
            deliveredThrough = read.newest
            // The old history's cursors go: the new one's events re-sent under those ids (a relay
            // going back, a new leader) are duplicates now, not another rewind.
            rememberOnly(read.newest)
            pending = []
            owedRead = nil
            retryEvents = false
            awaitingHistoryCheck = false
            doubted = nil
            return Step(rewound: read.newest)
        }
        // The store still holds what was delivered: the batch in doubt was an old copy, and so may
        // be every pending event it brought. They are dropped; the store has whatever is real, and
        // one more read right after this one fetches what committed since its snapshot.
        var droppedDoubtful = false
        if awaitingHistoryCheck, doubtReadIssued {
            awaitingHistoryCheck = false
            doubted = nil
            droppedDoubtful = !pending.isEmpty
            pending = []
        }
        if awaitingHistoryCheck {
            // Answered by a read taken before the doubt arose: deliver nothing yet, ask again.
            owedRead = .events
            return Step()
        }
        var delivered: [StoredEvent] = []
        for event in read.events where event.id > deliveredThrough.id {
            delivered.append(event)
            deliveredThrough = event.cursor
            remember(deliveredThrough)
        }
        pending.removeAll { $0.id <= deliveredThrough.id }
        // Pending before the read was taken yet above its snapshot's newest: no such event was
        // ever committed (a stale copy the broker delivered late, or a message someone else put on
        // the channel). Kept, it would ask for a read after every read, for ever.
        var discarded = 0
        if let takenWith {
            let before = pending.count
            pending.removeAll { $0.id > read.newest.id && $0.id <= takenWith }
            discarded = before - pending.count
        }
        delivered += drainPending()
        // More pages at once; a gap the store could not fill yet is retried on the next tick,
        // unless the pending events are newer than the read's snapshot: committed here while it
        // was in flight, their gap may well be in the store now, so read again at once.
        if owedRead == .events { retryEvents = false }
        let newerThanSnapshot = pending.first.map { $0.id > read.newest.id } ?? false
        // A check (no events asked for) that finds the store ahead: the broker has not brought them.
        // Not after an events read, which read what there was (no loop on a store that says so).
        let storeAhead = read.kind == .check && read.newest.id > deliveredThrough.id
        owedRead = read.isFull || newerThanSnapshot || storeAhead || droppedDoubtful ? .events : nil
        var silence: Bool?
        if read.kind == .check, mode == .broker {
            // A quiet check proves nothing either way (a low-traffic node alternates ahead and
            // quiet); only a delivering batch resets the count.
            if storeAhead && batchesSinceCheck == 0 { silentChecks += 1 }
            batchesSinceCheck = 0
            if silentChecks >= 2 {
                brokerSilent = true
                mode = .polling
                silence = true
            }
        }
        return Step(deliver: delivered, discarded: discarded, brokerSilence: silence)
    }

    /// A store read failed: everything pending stays; the next tick asks again. A failed periodic
    /// check waits for the next period instead: it asked again at every tick, so while the store was
    /// down every node read (and logged a warning) ten times a second (found by a review, 2026-12-05).
    public mutating func storeReadFailed() {
        if owedRead == .events { retryEvents = true }  // e.g. the read after `.subscribed`
        if owedRead == .check { ticksSinceCheck = 0 }
        owedRead = nil
        pendingWhenTaken = nil
        doubtedWhenTaken = nil
        doubtReadIssued = false  // a doubt stays until a read answers (the tick asks again)
    }

    /// Whether the store's event under a doubted id is another event than the one delivered
    /// (`false` when there is nothing to compare, e.g. pruned since).
    static func differs(_ doubted: EventCursor?, from stored: StoredEvent?) -> Bool {
        guard let doubted, let stored, stored.id == doubted.id else { return false }
        return !doubted.matches(stored)
    }

    /// Where `id`'s cursor is kept in `recent` (ids are positive).
    private static func slot(_ id: EventID) -> Int { Int(id.rawValue % Int64(recentCount)) }

    private mutating func remember(_ cursor: EventCursor) {
        guard cursor.id != .zero else { return }
        recent[Self.slot(cursor.id)] = cursor
    }

    /// Forgets every remembered cursor but `cursor` (a start, or a rewound history).
    private mutating func rememberOnly(_ cursor: EventCursor) {
        recent = Array(repeating: nil, count: Self.recentCount)
        remember(cursor)
    }

    private func remembered(_ id: EventID) -> EventCursor? {
        guard id.rawValue > 0, let cursor = recent[Self.slot(id)], cursor.id == id else { return nil }
        return cursor
    }

    /// Whether the read's events after `delivered` do not start right after it. Ids are dense, so
    /// the ones between were deleted before this feed delivered them: pruned early (a pruner whose
    /// clock ran ahead by the retention). Delivered as they are, the node's sockets would miss those
    /// events without a word and their cursors would move past them; handled as a rewind, they
    /// resume, and a cursor the history no longer covers gets `reset` and a full refetch (found by
    /// a review). Not from the origin, whose history may start anywhere.
    static func skipsPast(_ delivered: EventCursor, in read: StoreRead) -> Bool {
        guard delivered.id != .zero, let first = read.events.first(where: { $0.id > delivered.id }) else { return false }
        return first.id.rawValue != delivered.id.rawValue + 1
    }

    /// Whether the store no longer holds the history delivered so far.
    static func hasRewound(from delivered: EventCursor, to read: StoreRead) -> Bool {
        if read.newest.id < delivered.id { return true }
        guard delivered.id != .zero, let stored = read.atDelivered else { return false }  // pruned: nothing to compare
        return !delivered.matches(stored)
    }

    /// Adds a batch's events to `pending` (ascending by id, each id once; a copy is dropped).
    ///
    /// Batches arrive ascending, so this is nearly always an append. Otherwise one merge: inserting
    /// each event in turn (a search, a look for a copy, an insert: three passes over `pending`) cost
    /// about 4·10⁸ steps under the feed's lock for a hostile broker message of 10 000 ids below
    /// 10 000 pending ones (found by a review, 2026-12-05).
    private mutating func addPending(_ events: [StoredEvent]) {
        guard !events.isEmpty else { return }
        if pending.last.map({ $0.id < events[0].id }) ?? true, zip(events, events.dropFirst()).allSatisfy({ $0.id < $1.id }) {
            pending += events
            return
        }
        let incoming = events.sorted { $0.id < $1.id }
        var merged: [StoredEvent] = []
        merged.reserveCapacity(pending.count + incoming.count)
        var i = 0, j = 0
        while i < pending.count || j < incoming.count {
            let next: StoredEvent
            if j == incoming.count || (i < pending.count && pending[i].id <= incoming[j].id) {
                next = pending[i]
                i += 1
            } else {
                next = incoming[j]
                j += 1
            }
            if merged.last?.id != next.id { merged.append(next) }  // the first of equal ids stays
        }
        pending = merged
    }

    /// Takes the pending events that continue `deliveredThrough` with no gap.
    private mutating func drainPending() -> [StoredEvent] {
        var count = 0
        var next = deliveredThrough.id.rawValue + 1
        while count < pending.count, pending[count].id.rawValue == next {
            count += 1
            next += 1
        }
        guard count > 0 else { return [] }
        let ready = Array(pending[..<count])
        pending.removeFirst(count)
        markDelivered(ready[...])
        return ready
    }

    /// Remembers `events` (not empty, ascending, continuing delivery) as delivered; each cursor is
    /// computed once (its check is a hash of the event).
    private mutating func markDelivered(_ events: ArraySlice<StoredEvent>) {
        var last = deliveredThrough
        for event in events {
            last = event.cursor
            remember(last)
        }
        deliveredThrough = last
    }
}
