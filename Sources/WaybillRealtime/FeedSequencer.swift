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
/// - A gap keeps the batch pending and asks for a store read of `events(after: deliveredThrough)`;
///   the store's answer is authoritative, so a failed read only delays (never drops) delivery.
/// - While the broker subscription is lost, every tick asks for a store read (short poll); after
///   `.subscribed`, one read closes what was published in between, then polling stops.
/// - Every read also reports the store's newest event and the event at `deliveredThrough`: if the
///   newest id went below it, or that event now has another fingerprint, history rewound (a restore
///   or a failover) and the step says so; delivery restarts from the store's newest cursor.
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
        /// The broker subscription is lost: the store is read on every tick.
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
        /// `deliveredThrough` when the read was asked for (`nil`: unchanged since). Events committed
        /// in this process reach the sequencer while a read is in flight (`received`), so by the
        /// time it answers `deliveredThrough` may be past the read's snapshot; history is compared
        /// with what was delivered when the read began, or a newer delivery would look like a rewind.
        public var issuedAt: EventCursor?

        public init(
            events: [StoredEvent], isFull: Bool, newest: EventCursor, atDelivered: StoredEvent?,
            issuedAt: EventCursor? = nil
        ) {
            self.events = events
            self.isFull = isFull
            self.newest = newest
            self.atDelivered = atDelivered
            self.issuedAt = issuedAt
        }
    }

    /// What the feed does next.
    public struct Step: Sendable, Equatable {
        /// Hand these to the hub, in this order.
        public var deliver: [StoredEvent] = []
        /// History rewound: close every socket with 1012; delivery continues after this cursor.
        public var rewound: EventCursor?
        public init(deliver: [StoredEvent] = [], rewound: EventCursor? = nil) {
            self.deliver = deliver
            self.rewound = rewound
        }
    }

    /// The highest contiguous event handed to the hub.
    public private(set) var deliveredThrough: EventCursor
    public private(set) var mode: Mode = .broker
    /// What the feed should read from the store now, if anything.
    public private(set) var owedRead: ReadKind?
    /// A read of events failed: the next tick asks again even with nothing pending.
    private var retryEvents = false
    /// Broker events above a gap, ascending, waiting for the store read that fills it.
    private var pending: [StoredEvent] = []
    private var ticksSinceCheck = 0
    private let ticksPerCheck: Int
    private let maxPending: Int

    /// - Parameters:
    ///   - deliveredThrough: where delivery starts (the store's newest cursor at startup).
    ///   - ticksPerCheck: ticks between history checks while the broker delivers (e.g. 5 s / 100 ms).
    ///   - maxPending: broker events kept above a gap; past it they are dropped and read from the store.
    public init(deliveredThrough: EventCursor, ticksPerCheck: Int = 50, maxPending: Int = 10_000) {
        self.deliveredThrough = deliveredThrough
        self.ticksPerCheck = max(1, ticksPerCheck)
        self.maxPending = maxPending
    }

    /// A batch from the broker, or events this process just committed (in id order).
    public mutating func received(_ batch: [StoredEvent]) -> Step {
        for event in batch where event.id > deliveredThrough.id { insertPending(event) }
        let step = Step(deliver: drainPending())
        if !pending.isEmpty { owedRead = .events }  // a gap below what is pending
        if pending.count > maxPending { pending = [] }  // the store has them all; memory stays bounded
        return step
    }

    /// The broker subscription dropped: read the store now and on every tick until `.subscribed`.
    public mutating func lost() {
        mode = .polling
        owedRead = .events
    }

    /// Subscribed (again): one store read closes what was published while it was down.
    public mutating func subscribed() {
        mode = .broker
        owedRead = .events
    }

    /// The poll interval passed.
    public mutating func tick() {
        ticksSinceCheck += 1
        if mode == .polling || !pending.isEmpty || retryEvents {
            owedRead = .events
        } else if ticksSinceCheck >= ticksPerCheck, owedRead == nil {
            owedRead = .check
        }
    }

    /// A store read answered. The store is the truth: what it has after `deliveredThrough` is
    /// delivered, then whatever pending broker events continue it.
    public mutating func storeRead(_ read: StoreRead) -> Step {
        ticksSinceCheck = 0
        if Self.hasRewound(from: read.issuedAt ?? deliveredThrough, to: read) {
            deliveredThrough = read.newest
            pending = []
            owedRead = nil
            retryEvents = false
            return Step(rewound: read.newest)
        }
        var delivered: [StoredEvent] = []
        for event in read.events where event.id > deliveredThrough.id {
            delivered.append(event)
            deliveredThrough = event.cursor
        }
        pending.removeAll { $0.id <= deliveredThrough.id }
        delivered += drainPending()
        // More pages at once; a gap the store could not fill yet is retried on the next tick,
        // unless the pending events are newer than the read's snapshot: committed here while it
        // was in flight, their gap may well be in the store now, so read again at once.
        if owedRead == .events { retryEvents = false }
        let newerThanSnapshot = pending.first.map { $0.id > read.newest.id } ?? false
        owedRead = read.isFull || newerThanSnapshot ? .events : nil
        return Step(deliver: delivered)
    }

    /// A store read failed: everything pending stays; the next tick asks again.
    public mutating func storeReadFailed() {
        if owedRead == .events { retryEvents = true }  // e.g. the read after `.subscribed`
        owedRead = nil
    }

    /// Whether the store no longer holds the history delivered so far.
    static func hasRewound(from delivered: EventCursor, to read: StoreRead) -> Bool {
        if read.newest.id < delivered.id { return true }
        guard delivered.id != .zero, let stored = read.atDelivered else { return false }  // pruned: nothing to compare
        return !delivered.matches(stored)
    }

    private mutating func insertPending(_ event: StoredEvent) {
        // Batches arrive ascending, so this is nearly always an append.
        if let last = pending.last, last.id >= event.id {
            guard !pending.contains(where: { $0.id == event.id }) else { return }
            let index = pending.firstIndex { $0.id > event.id } ?? pending.endIndex
            pending.insert(event, at: index)
        } else {
            pending.append(event)
        }
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
        deliveredThrough = ready[ready.count - 1].cursor
        return ready
    }
}
