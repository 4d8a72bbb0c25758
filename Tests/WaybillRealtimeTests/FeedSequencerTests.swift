import Testing
import WaybillDomain
import WaybillRealtime

/// The feed's sequencing rules on plain values: what reaches the hub, and when the store is read.
struct FeedSequencerTests {
    static let start = Fixtures.event(10).cursor

    static func read(_ ids: [Int64], newest: Int64, atDelivered: StoredEvent?, full: Bool = false) -> FeedSequencer.StoreRead {
        .init(events: Fixtures.events(ids), isFull: full, newest: Fixtures.event(newest).cursor, atDelivered: atDelivered)
    }

    static func ids(_ step: FeedSequencer.Step) -> [Int64] { step.deliver.map(\.id.rawValue) }

    /// A feed whose broker subscription is up and whose first read (after `.subscribed`) found nothing new.
    static func subscribed(ticksPerCheck: Int = 50) -> FeedSequencer {
        var feed = FeedSequencer(deliveredThrough: start, ticksPerCheck: ticksPerCheck)
        feed.subscribed()
        _ = feed.storeRead(read([], newest: 10, atDelivered: Fixtures.event(10)))
        return feed
    }

    /// A check read (no events asked for), as the feed issues it every `ticksPerCheck` ticks.
    static func check(newest: Int64, atDelivered: StoredEvent?) -> FeedSequencer.StoreRead {
        .init(events: [], isFull: false, newest: Fixtures.event(newest).cursor, atDelivered: atDelivered, kind: .check)
    }

    @Test func contiguousBatchesGoStraightThroughWithoutStoreReads() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(Self.ids(feed.received(Fixtures.events(11...13))) == [11, 12, 13])
        #expect(Self.ids(feed.received(Fixtures.events(14...14))) == [14])
        #expect(feed.owedRead == nil)
        #expect(feed.deliveredThrough == Fixtures.event(14).cursor)
    }

    @Test func duplicatesFromARepublishingRelayAreDropped() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        _ = feed.received(Fixtures.events(11...13))
        #expect(Self.ids(feed.received(Fixtures.events(9...13))).isEmpty)
        #expect(Self.ids(feed.received(Fixtures.events([12, 13, 14, 14, 15]))) == [14, 15])
        #expect(feed.owedRead == nil)
    }

    @Test func aGapIsFilledFromTheStoreThenThePendingBatchFollows() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(Self.ids(feed.received(Fixtures.events(14...15))).isEmpty)  // 11...13 went missing
        #expect(feed.owedRead == .events)
        let filled = feed.storeRead(Self.read([11, 12, 13, 14], newest: 14, atDelivered: Fixtures.event(10)))
        #expect(Self.ids(filled) == [11, 12, 13, 14, 15])
        #expect(feed.owedRead == nil)
        #expect(Self.ids(feed.received(Fixtures.events(13...16))) == [16])
    }

    @Test func batchesOutOfOrderAreReorderedWithoutDuplicates() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(Self.ids(feed.received(Fixtures.events(13...14))).isEmpty)
        #expect(Self.ids(feed.received(Fixtures.events(11...12))) == [11, 12, 13, 14])
        #expect(Self.ids(feed.storeRead(Self.read([11, 12, 13, 14], newest: 14, atDelivered: Fixtures.event(10)))).isEmpty)
    }

    /// A batch that falls below and among the pending events is merged in: each id once, in order,
    /// the copy already pending kept.
    @Test func aBatchBelowAndAmongPendingEventsIsMergedOnceEach() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(Self.ids(feed.received(Fixtures.events([13, 15, 17]))).isEmpty)  // 11 and 12 went missing
        #expect(Self.ids(feed.received(Fixtures.events([12, 13, 14, 16, 18]))).isEmpty)
        #expect(Self.ids(feed.received(Fixtures.events([18, 16, 19]))).isEmpty)  // not ascending: still merged
        #expect(Self.ids(feed.received(Fixtures.events([11]))) == Array(11...19))
        #expect(Self.ids(feed.received(Fixtures.events([20]))) == [20])
    }

    @Test func aFailedStoreReadKeepsThePendingBatchAndTheNextTickRetries() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        _ = feed.received(Fixtures.events(13...13))
        feed.storeReadFailed()
        #expect(feed.owedRead == nil)  // no spinning on a failing store
        feed.tick()
        #expect(feed.owedRead == .events)
        #expect(Self.ids(feed.storeRead(Self.read([11, 12], newest: 13, atDelivered: Fixtures.event(10)))) == [11, 12, 13])
    }

    /// A failed periodic check (the broker delivering, the store down) is asked again a period
    /// later, not at every tick.
    @Test func aFailedCheckWaitsForTheNextPeriod() {
        var feed = FeedSequencer(deliveredThrough: Self.start, ticksPerCheck: 3)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        for _ in 0..<3 { feed.tick() }
        #expect(feed.owedRead == .check)
        _ = feed.takeRead()
        feed.storeReadFailed()
        feed.tick()
        feed.tick()
        #expect(feed.owedRead == nil, "not at every tick")
        feed.tick()
        #expect(feed.owedRead == .check)
    }

    @Test func aSkippedBrokerMessageOwesAnEventsRead() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        #expect(feed.owedRead == nil)
        feed.batchSkipped()
        #expect(feed.owedRead == .events)
    }

    /// Runs one periodic check (`ticks` ticks, then its read) that finds the store's newest at
    /// `newest`, and then the events read it owes when that is ahead; returns the check's step.
    static func check(_ feed: inout FeedSequencer, ticks: Int, newest: Int64) -> FeedSequencer.Step {
        for _ in 0..<ticks { feed.tick() }
        #expect(feed.owedRead == .check)
        _ = feed.takeRead()
        let through = feed.deliveredThrough.id.rawValue
        let step = feed.storeRead(check(newest: newest, atDelivered: Fixtures.event(through)))
        if newest > through {
            _ = feed.takeRead()
            _ = feed.storeRead(read(Array(through + 1...newest), newest: newest, atDelivered: Fixtures.event(through)))
        }
        return step
    }

    /// Subscribed, but two checks in a row find the store ahead with no broker batch since the one
    /// before (this node's Redis is not the leader's): the feed polls the store at every tick, and
    /// goes back to the broker at its next batch. Before, it delivered only at each 5 s check.
    @Test func aBrokerThatBringsNothingWhileTheStoreMovesOnIsPolledAround() {
        var feed = FeedSequencer(deliveredThrough: Self.start, ticksPerCheck: 2)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        #expect(Self.check(&feed, ticks: 2, newest: 12).brokerSilence == nil, "one check is not enough")
        #expect(feed.mode == .broker)
        #expect(Self.check(&feed, ticks: 2, newest: 14).brokerSilence == true)
        #expect(feed.mode == .polling && feed.brokerSilent)
        feed.tick()
        #expect(feed.owedRead == .events, "the store is read at every tick")
        _ = feed.takeRead()
        _ = feed.storeRead(Self.read([], newest: 14, atDelivered: Fixtures.event(14)))
        // A batch: the broker delivers again.
        let step = feed.received(Fixtures.events(15...15))
        #expect(step.brokerSilence == false && FeedSequencerTests.ids(step) == [15])
        #expect(feed.mode == .broker && !feed.brokerSilent)
    }

    /// Checks that find the store ahead while batches keep coming (a busy cluster: a commit whose
    /// batch is on its way) are not silence.
    @Test func aStoreAheadAtChecksWithBatchesBetweenIsNotSilence() {
        var feed = FeedSequencer(deliveredThrough: Self.start, ticksPerCheck: 1)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        for round in 0..<4 {
            let next = 11 + Int64(round) * 2
            _ = feed.received(Fixtures.events(next...next))
            feed.tick()
            _ = feed.takeRead()
            #expect(feed.storeRead(Self.check(newest: next + 1, atDelivered: Fixtures.event(next))).brokerSilence == nil)
            _ = feed.takeRead()
            _ = feed.storeRead(Self.read([next + 1], newest: next + 1, atDelivered: Fixtures.event(next)))
        }
        #expect(feed.mode == .broker && !feed.brokerSilent)
    }

    /// A foreign batch (another deployment's Redis on the same channel: ids far above the store's)
    /// proves nothing about this node's broker, and a quiet check in between resets nothing: a
    /// low-traffic node alternates ahead and quiet.
    @Test func foreignBatchesAndQuietChecksDoNotHideASilentBroker() {
        var feed = FeedSequencer(deliveredThrough: Self.start, ticksPerCheck: 1)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        #expect(Self.check(&feed, ticks: 1, newest: 11).brokerSilence == nil)  // ahead, no batch: 1
        _ = feed.received(Fixtures.events(900...901))  // foreign: a gap, pending, delivers nothing
        _ = feed.takeRead()
        _ = feed.storeRead(Self.read([], newest: 11, atDelivered: Fixtures.event(11)))  // dropped as foreign
        #expect(Self.check(&feed, ticks: 1, newest: 11).brokerSilence == nil)  // quiet: still 1
        #expect(Self.check(&feed, ticks: 1, newest: 12).brokerSilence == true)  // ahead again, no delivering batch: 2
        _ = feed.received(Fixtures.events(950...950))  // foreign again: still silent
        #expect(feed.brokerSilent && feed.mode == .polling)
    }

    /// Unreadable messages ask for a store read at most once per tick.
    @Test func skippedMessagesAskForOneReadPerTick() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.batchSkipped()
        #expect(feed.owedRead == .events)
        _ = feed.takeRead()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.batchSkipped()
        feed.batchSkipped()
        #expect(feed.owedRead == nil, "a second skip in the same tick waits")
        feed.tick()
        #expect(feed.owedRead == .events, "and is read at the next tick")
    }

    @Test func aFullPageAsksForTheNextAtOnce() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        feed.lost()
        #expect(Self.ids(feed.storeRead(Self.read([11, 12], newest: 20, atDelivered: Fixtures.event(10), full: true))) == [11, 12])
        #expect(feed.owedRead == .events)
    }

    @Test func whileTheBrokerIsLostEveryTickReadsTheStoreAndSubscribedEndsIt() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        feed.lost()
        #expect(feed.mode == .polling && feed.owedRead == .events)
        #expect(Self.ids(feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))).isEmpty)
        #expect(feed.owedRead == nil)
        feed.tick()
        #expect(feed.owedRead == .events)
        #expect(Self.ids(feed.storeRead(Self.read([11, 12], newest: 12, atDelivered: Fixtures.event(10)))) == [11, 12])
        feed.subscribed()
        #expect(feed.owedRead == .events)  // closes what was published in between
        #expect(Self.ids(feed.storeRead(Self.read([13], newest: 13, atDelivered: Fixtures.event(12)))) == [13])
        #expect(Self.ids(feed.received(Fixtures.events(12...14))) == [14])  // the overlap is not sent twice
        #expect(feed.mode == .broker, "a batch delivered: back on the broker")
        feed.tick()
        #expect(feed.owedRead == nil, "no more polling")
    }

    /// Redis restarted: the subscription is back before the relay's publisher, which reconnects on a
    /// backoff of its own (measured 1.2 s later). Nothing is published meanwhile, so the store is
    /// still read on every tick until a broker batch delivers; copies of what the reads delivered
    /// (the publisher's backlog) prove nothing.
    @Test func aSubscriptionBackKeepsPollingUntilABrokerBatchDelivers() {
        var feed = Self.subscribed()
        feed.lost()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.subscribed()
        #expect(feed.awaitingBrokerBatch && feed.mode == .polling)
        #expect(feed.owedRead == .events, "the read that closes the gap")
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.tick()
        #expect(feed.owedRead == .events, "committed while the publisher is away: read at the next tick")
        #expect(Self.ids(feed.storeRead(Self.read([11, 12], newest: 12, atDelivered: Fixtures.event(10)))) == [11, 12])
        #expect(Self.ids(feed.received(Fixtures.events(11...12))).isEmpty, "the publisher's backlog")
        feed.tick()
        #expect(feed.owedRead == .events, "a backlog of delivered events proves nothing: still polling")
        _ = feed.storeRead(Self.read([], newest: 12, atDelivered: Fixtures.event(12)))
        #expect(Self.ids(feed.received(Fixtures.events(13...13))) == [13])
        #expect(feed.mode == .broker && !feed.awaitingBrokerBatch)
        feed.tick()
        #expect(feed.owedRead == nil, "the broker delivers: polling stops")
    }

    /// An idle cluster has nothing to publish: the wait for a delivering batch ends after
    /// `maxTicksAwaitingBatch` ticks (5 s) anyway, or every node polled until its next write.
    @Test func theWaitForABrokerBatchEndsAfterFiveSecondsWithoutOne() {
        var feed = Self.subscribed()
        feed.lost()
        feed.subscribed()
        for tick in 1..<FeedSequencer.maxTicksAwaitingBatch {
            _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
            feed.tick()
            #expect(feed.owedRead == .events, "tick \(tick): still polling")
        }
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.tick()
        #expect(feed.mode == .broker && !feed.awaitingBrokerBatch)
        #expect(feed.owedRead == nil, "the broker is trusted again; its checks cover the rest")
    }

    /// `.subscribed` said again while waiting (the feed replays the broker's last word after
    /// dropped inputs) does not end the wait.
    @Test func aSecondSubscribedWhileWaitingKeepsWaiting() {
        var feed = Self.subscribed()
        feed.lost()
        feed.subscribed()
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.subscribed()
        #expect(feed.awaitingBrokerBatch && feed.mode == .polling)
    }

    /// Lost again before any batch came: polling goes on, and the next subscription waits as well.
    @Test func aSubscriptionLostAgainBeforeItsFirstBatchStillPolls() {
        var feed = Self.subscribed()
        feed.lost()
        feed.subscribed()
        feed.lost()
        #expect(feed.mode == .polling && !feed.awaitingBrokerBatch)
        feed.subscribed()
        #expect(feed.mode == .polling && feed.awaitingBrokerBatch)
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.tick()
        #expect(feed.owedRead == .events)
    }

    @Test func theHistoryIsCheckedPeriodicallyWithoutReadingEvents() {
        var feed = Self.subscribed(ticksPerCheck: 3)
        feed.tick()
        feed.tick()
        #expect(feed.owedRead == nil)
        feed.tick()
        #expect(feed.owedRead == .check)
        #expect(feed.storeRead(Self.check(newest: 10, atDelivered: Fixtures.event(10))) == .init())
        #expect(feed.owedRead == nil)
    }

    /// Redis down (or unreachable) when the node starts: the subscription says neither `.subscribed`
    /// nor `.lost`, and the feed must still read new events from the store on every tick.
    @Test func aFeedPollsTheStoreUntilItsBrokerFirstSaysSubscribed() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(feed.mode == .polling)
        feed.tick()
        #expect(feed.owedRead == .events)
        #expect(Self.ids(feed.storeRead(Self.read([11], newest: 11, atDelivered: Fixtures.event(10)))) == [11])
        feed.tick()
        #expect(feed.owedRead == .events, "still no subscription: still polling")
        _ = feed.storeRead(Self.read([], newest: 11, atDelivered: Fixtures.event(11)))
        feed.subscribed()
        #expect(feed.owedRead == .events)
        _ = feed.storeRead(Self.read([], newest: 11, atDelivered: Fixtures.event(11)))
        feed.tick()
        #expect(feed.owedRead == .events, "the broker was down: polling until a batch delivers")
        _ = feed.storeRead(Self.read([], newest: 11, atDelivered: Fixtures.event(11)))
        #expect(Self.ids(feed.received(Fixtures.events(12...12))) == [12])
        feed.tick()
        #expect(feed.owedRead == nil, "a batch delivered: the broker delivers now")
    }

    /// Up at the start (subscribed before the first tick), the broker is trusted at once: an idle
    /// node does not poll until its first event.
    @Test func aBrokerUpAtTheStartIsTrustedAtOnce() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        feed.subscribed()
        #expect(feed.mode == .broker && !feed.awaitingBrokerBatch)
        _ = feed.storeRead(Self.read([], newest: 10, atDelivered: Fixtures.event(10)))
        feed.tick()
        #expect(feed.owedRead == nil)
    }

    /// Subscribed, but the batches never come (the relay's leader cannot reach Redis): the periodic
    /// check finds the store ahead and reads the events itself.
    @Test func aCheckThatFindsTheStoreAheadReadsTheEvents() {
        var feed = Self.subscribed(ticksPerCheck: 2)
        feed.tick()
        feed.tick()
        #expect(feed.takeRead()?.kind == .check)
        #expect(feed.storeRead(Self.check(newest: 12, atDelivered: Fixtures.event(10))).deliver.isEmpty)
        #expect(feed.owedRead == .events, "the store has 11 and 12; the broker did not bring them")
        #expect(Self.ids(feed.storeRead(Self.read([11, 12], newest: 12, atDelivered: Fixtures.event(10)))) == [11, 12])
        #expect(feed.owedRead == nil)
        #expect(Self.ids(feed.received(Fixtures.events(11...13))) == [13], "late broker copies are dropped")
    }

    /// An events read that finds nothing after the cursor is not repeated at once, whatever the
    /// store says its newest id is (no read loop).
    @Test func anEventsReadThatFindsNothingNewIsNotRepeatedAtOnce() {
        var feed = Self.subscribed()
        feed.lost()
        _ = feed.storeRead(Self.read([], newest: 15, atDelivered: Fixtures.event(10)))
        #expect(feed.owedRead == nil)
    }

    @Test func aNewestIdBelowWhatWasDeliveredIsARewind() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        let step = feed.storeRead(Self.read([], newest: 7, atDelivered: nil))
        #expect(step.rewound == Fixtures.event(7).cursor && step.deliver.isEmpty)
        #expect(feed.deliveredThrough == Fixtures.event(7).cursor)
        #expect(Self.ids(feed.received(Fixtures.events(8...8))) == [8])
    }

    @Test func aDeliveredIdWithAnotherFingerprintIsARewind() {
        var feed = Self.subscribed()
        _ = feed.received(Fixtures.events(14...14))  // pending above a gap: dropped by the rewind
        let other = Fixtures.event(10, committedAt: 99)
        let step = feed.storeRead(Self.read([11, 12], newest: 12, atDelivered: other))
        #expect(step.rewound == Fixtures.event(12).cursor && step.deliver.isEmpty)
        feed.tick()
        #expect(feed.owedRead == nil)
    }

    @Test func aPrunedDeliveredEventIsNoRewind() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        let step = feed.storeRead(Self.read([11], newest: 11, atDelivered: nil))
        #expect(step.rewound == nil && Self.ids(step) == [11])
    }

    /// Events after the delivered one that the store no longer has (pruned before this feed
    /// delivered them) are not skipped in silence: the feed treats it as a rewind, so its sockets
    /// resume (and get `reset`), and nothing after the gap is delivered as if it followed.
    @Test func aReadThatSkipsPastTheDeliveredEventIsARewind() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        let step = feed.storeRead(Self.read([15, 16], newest: 16, atDelivered: nil))
        #expect(step.rewound?.id == EventID(16))
        #expect(Self.ids(step).isEmpty)
        // After it, the feed goes on from the store's newest as usual.
        #expect(Self.ids(feed.received(Fixtures.events(17...18))) == [17, 18])
    }

    /// Local events delivered while the read was in flight: continuity is judged from them.
    @Test func aReadJudgedFromWhatWasDeliveredMeanwhileIsNoGap() {
        var feed = FeedSequencer(deliveredThrough: Self.start)
        #expect(Self.ids(feed.received(Fixtures.events(11...13))) == [11, 12, 13])
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events(Array(11...15)), isFull: false, newest: Fixtures.event(15).cursor,
            atDelivered: Fixtures.event(10), issuedAt: Self.start)
        let step = feed.storeRead(read)
        #expect(step.rewound == nil && Self.ids(step) == [14, 15])
    }

    @Test func theOriginIsNeverRewoundFrom() {
        var feed = FeedSequencer(deliveredThrough: .origin)
        #expect(feed.storeRead(Self.read([], newest: 0, atDelivered: nil)).rewound == nil)
        #expect(Self.ids(feed.received(Fixtures.events(1...2))) == [1, 2])
    }

    @Test func pendingEventsAreBoundedAndTheStoreStillDeliversThemAll() {
        var feed = FeedSequencer(deliveredThrough: Self.start, maxPending: 3)
        _ = feed.received(Fixtures.events(15...20))  // over the bound: forgotten, not lost
        #expect(feed.owedRead == .events)
        let step = feed.storeRead(Self.read(Array(11...20), newest: 20, atDelivered: Fixtures.event(10)))
        #expect(Self.ids(step) == Array(11...20))
    }
}

/// Events committed in this process reach the sequencer while a store read is in flight: the
/// read's answer is judged against what was delivered when it was asked for.
struct FeedSequencerReadInFlightTests {
    @Test func localEventsDeliveredDuringAReadDoNotMakeItLookLikeARewind() {
        var feed = FeedSequencer(deliveredThrough: FeedSequencerTests.start)
        let issuedAt = feed.deliveredThrough  // the feed task asks the store for events after 10
        #expect(FeedSequencerTests.ids(feed.received(Fixtures.events(11...13))) == [11, 12, 13])
        // The snapshot was taken before 13 committed: its newest (12) is below what is delivered now.
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events([11, 12]), isFull: false, newest: Fixtures.event(12).cursor,
            atDelivered: Fixtures.event(10), issuedAt: issuedAt)
        let step = feed.storeRead(read)
        #expect(step.rewound == nil)
        #expect(step.deliver.isEmpty, "11 and 12 went out already")
        #expect(feed.deliveredThrough == Fixtures.event(13).cursor)
    }

    @Test func aRealRewindIsStillSeenWhenLocalEventsArrivedDuringTheRead() {
        var feed = FeedSequencer(deliveredThrough: FeedSequencerTests.start)
        let issuedAt = feed.deliveredThrough
        _ = feed.received(Fixtures.events(11...11))
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(7).cursor, atDelivered: nil, issuedAt: issuedAt)
        #expect(feed.storeRead(read).rewound == Fixtures.event(7).cursor)
        let other = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(12).cursor,
            atDelivered: Fixtures.event(7, committedAt: 99), issuedAt: Fixtures.event(7).cursor)
        #expect(feed.storeRead(other).rewound == Fixtures.event(12).cursor, "the event read for then is another one")
    }

    /// A broker event the store has no trace of in a snapshot taken after it arrived (a stale copy
    /// published late, or a message someone else put on the channel) is dropped after that one
    /// read: kept, it made every read owe another at once, and the feed read the store in a loop.
    @Test func anEventTheStoreNeverHadIsDroppedAfterOneRead() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received(Fixtures.events([9_000_000]))
        #expect(feed.owedRead == .events)
        let taken = feed.takeRead()
        #expect(taken?.kind == .events)
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: FeedSequencerTests.start, atDelivered: Fixtures.event(10),
            issuedAt: taken?.after)
        let step = feed.storeRead(read)
        #expect(step.deliver.isEmpty && step.discarded == 1)
        #expect(feed.owedRead == nil, "no read after read for an id the store never had")
        // Delivery goes on as before.
        #expect(FeedSequencerTests.ids(feed.received(Fixtures.events(11...12))) == [11, 12])
        #expect(feed.owedRead == nil)
    }

    /// Only events that were pending when the read was taken are judged by it: one that arrives
    /// while the read is in flight may be newer than its snapshot, and is read again instead.
    @Test func anEventArrivingDuringTheReadIsNotJudgedByIt() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received(Fixtures.events(12...12))  // 11 missing
        let taken = feed.takeRead()
        _ = feed.received(Fixtures.events(14...14))  // committed (13, 14) after the snapshot below
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events([11, 12]), isFull: false, newest: Fixtures.event(12).cursor,
            atDelivered: Fixtures.event(10), issuedAt: taken?.after)
        let step = feed.storeRead(read)
        #expect(FeedSequencerTests.ids(step) == [11, 12] && step.discarded == 0)
        #expect(feed.owedRead == .events)
        _ = feed.takeRead()
        let next = FeedSequencer.StoreRead(
            events: Fixtures.events([13, 14]), isFull: false, newest: Fixtures.event(14).cursor,
            atDelivered: Fixtures.event(12), issuedAt: feed.deliveredThrough)
        #expect(FeedSequencerTests.ids(feed.storeRead(next)) == [13, 14])
    }

    @Test func aGapAboveTheSnapshotOfAReadInFlightIsReadAgainAtOnce() {
        var feed = FeedSequencer(deliveredThrough: FeedSequencerTests.start)
        _ = feed.received(Fixtures.events(11...11))
        let issuedAt = feed.deliveredThrough
        _ = feed.received(Fixtures.events(13...13))  // 12 came from another process, after the snapshot below
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(11).cursor, atDelivered: Fixtures.event(11), issuedAt: issuedAt)
        #expect(feed.storeRead(read).deliver.isEmpty)
        #expect(feed.owedRead == .events, "not left for the next tick: the snapshot predates the pending event")
        let next = FeedSequencer.StoreRead(
            events: Fixtures.events([12, 13]), isFull: false, newest: Fixtures.event(13).cursor,
            atDelivered: Fixtures.event(11), issuedAt: feed.deliveredThrough)
        #expect(FeedSequencerTests.ids(feed.storeRead(next)) == [12, 13])
        #expect(feed.owedRead == nil)
    }
}

/// A broker batch that names the delivered event's id with another fingerprint: after a failover
/// the new leader may re-send ids this node delivered from the old history. Nothing is delivered
/// until a store read, taken after the batch came, says whether history rewound.
struct FeedSequencerRenamedEventTests {
    static let renamed = Fixtures.event(10, committedAt: 99)

    @Test func aBatchRenamingTheDeliveredEventHoldsDeliveryAndTheStoreConfirmsTheRewind() {
        var feed = FeedSequencerTests.subscribed()
        let batch = [Self.renamed] + Fixtures.events(11...12)
        #expect(feed.received(batch).deliver.isEmpty, "not delivered as if it continued the old history")
        #expect(feed.awaitingHistoryCheck && feed.owedRead == .events)
        #expect(feed.takeRead()?.kind == .events)
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events([11, 12]), isFull: false, newest: Fixtures.event(12).cursor,
            atDelivered: Self.renamed, issuedAt: FeedSequencerTests.start)
        let step = feed.storeRead(read)
        #expect(step.rewound == Fixtures.event(12).cursor && step.deliver.isEmpty)
        #expect(!feed.awaitingHistoryCheck)
    }

    /// The store still has the delivered event: the batch was an old copy, and nothing it brought
    /// is sent (its 12 never existed in this history); the store's events are, and one more read
    /// fetches what committed after the snapshot.
    @Test func anOldCopyIsSettledByTheStoreAndOnlyTheStoresEventsGoOut() {
        var feed = FeedSequencerTests.subscribed()
        #expect(feed.received([Self.renamed] + Fixtures.events(11...12, committedAt: 99)).deliver.isEmpty)
        _ = feed.takeRead()
        let step = feed.storeRead(FeedSequencerTests.read([11], newest: 11, atDelivered: Fixtures.event(10)))
        #expect(step.rewound == nil)
        #expect(step.deliver == Fixtures.events(11...11), "the store's 11, not the old copy's 11 and 12")
        #expect(!feed.awaitingHistoryCheck)
        #expect(feed.owedRead == .events, "what the old copy brought is read again from the store")
        #expect(FeedSequencerTests.ids(feed.storeRead(FeedSequencerTests.read([12], newest: 12, atDelivered: Fixtures.event(11)))) == [12])
        #expect(feed.owedRead == nil)
    }

    /// The feed's queue dropped the batch that renamed the delivered event (history rewound under
    /// the node): the next batch continues the old ids, but is not delivered before a store read
    /// has compared the history, which finds the rewind (found by a read-only review).
    @Test func afterDroppedInputsTheNextBatchWaitsForTheHistoryCheck() {
        var feed = FeedSequencerTests.subscribed()
        feed.inputsDropped()
        #expect(feed.received(Fixtures.events(11...12, committedAt: 99)).deliver.isEmpty)
        #expect(feed.takeRead()?.kind == .events)
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events(11...12, committedAt: 99), isFull: false,
            newest: Fixtures.event(12, committedAt: 99).cursor, atDelivered: Self.renamed,
            issuedAt: FeedSequencerTests.start)
        #expect(feed.storeRead(read).rewound == Fixtures.event(12, committedAt: 99).cursor)
        // Without a rewind the store's read delivers as usual.
        var calm = FeedSequencerTests.subscribed()
        calm.inputsDropped()
        #expect(calm.received(Fixtures.events(11...11)).deliver.isEmpty)
        _ = calm.takeRead()
        let step = calm.storeRead(FeedSequencerTests.read([11], newest: 11, atDelivered: Fixtures.event(10)))
        #expect(step.rewound == nil && FeedSequencerTests.ids(step) == [11])
    }

    @Test func aReadTakenBeforeTheBatchDoesNotSettleTheDoubt() {
        var feed = FeedSequencerTests.subscribed()
        feed.lost()
        _ = feed.takeRead()  // in flight, maybe answered by the old primary
        #expect(feed.received([Self.renamed] + Fixtures.events(11...11)).deliver.isEmpty)
        let stale = feed.storeRead(FeedSequencerTests.read([], newest: 10, atDelivered: Fixtures.event(10)))
        #expect(stale.rewound == nil && stale.deliver.isEmpty)
        #expect(feed.awaitingHistoryCheck && feed.owedRead == .events, "a read taken after the batch must decide")
        _ = feed.takeRead()
        let read = FeedSequencer.StoreRead(
            events: Fixtures.events([11]), isFull: false, newest: Fixtures.event(11).cursor, atDelivered: Self.renamed)
        #expect(feed.storeRead(read).rewound == Fixtures.event(11).cursor)
    }

    @Test func aFailedReadLeavesTheDoubtForTheNextTick() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received([Self.renamed])
        _ = feed.takeRead()
        feed.storeReadFailed()
        #expect(feed.awaitingHistoryCheck && feed.owedRead == nil)
        feed.tick()
        #expect(feed.owedRead == .events)
    }

    /// A relay that finds the history rewound under events it already published goes back to the
    /// event that changed: the feed has delivered past it (14 here, on top of the old 12), so the
    /// renamed id is below `deliveredThrough`. The read of that id decides.
    @Test func aBatchRenamingAnOlderDeliveredEventIsCheckedAtThatId() {
        var feed = FeedSequencerTests.subscribed()
        #expect(FeedSequencerTests.ids(feed.received(Fixtures.events(11...14))) == [11, 12, 13, 14])
        let renamed = Fixtures.event(12, committedAt: 99)
        #expect(feed.received([renamed, Fixtures.event(13, committedAt: 99)]).deliver.isEmpty)
        #expect(feed.awaitingHistoryCheck && feed.owedRead == .events)
        let taken = feed.takeRead()
        #expect(taken?.doubted == EventID(12))
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(14).cursor, atDelivered: Fixtures.event(14),
            issuedAt: taken?.after, atDoubted: renamed)
        #expect(feed.storeRead(read).rewound == Fixtures.event(14).cursor, "the store's 12 is another event")
        #expect(!feed.awaitingHistoryCheck)
        #expect(feed.takeRead() == nil)
    }

    /// The store still has the delivered 12: the batch was an old copy; delivery goes on.
    @Test func anOldCopyOfAnOlderIdIsSettledByTheStore() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received(Fixtures.events(11...14))
        _ = feed.received([Fixtures.event(12, committedAt: 99)])
        let taken = feed.takeRead()
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(14).cursor, atDelivered: Fixtures.event(14),
            issuedAt: taken?.after, atDoubted: Fixtures.event(12))
        #expect(feed.storeRead(read).rewound == nil)
        #expect(FeedSequencerTests.ids(feed.received(Fixtures.events(15...15))) == [15])
    }

    /// Only recent ids are remembered (`recentCount`); a re-sent id older than that is a duplicate.
    @Test func anIdOlderThanTheRememberedOnesIsDroppedAsBefore() {
        var feed = FeedSequencerTests.subscribed()
        let count = Int64(FeedSequencer.recentCount)
        _ = feed.received(Fixtures.events(11...(10 + count + 1)))
        #expect(feed.received([Fixtures.event(11, committedAt: 99)]).deliver.isEmpty)
        #expect(!feed.awaitingHistoryCheck && feed.owedRead == nil)
        _ = feed.received([Fixtures.event(13, committedAt: 99)])
        #expect(feed.awaitingHistoryCheck, "13 is still remembered")
    }

    /// After a rewind the old history's fingerprints are forgotten: the new history's events re-sent
    /// under ids at or below the new start (a relay going back in batches, a new leader) are
    /// duplicates, not a second rewind that would close every socket again (found by a review).
    @Test func afterARewindTheNewHistoryResentIsNoSecondRewind() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received(Fixtures.events(11...14))
        _ = feed.received([Fixtures.event(12, committedAt: 99)])
        _ = feed.takeRead()
        let rewound = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(14, committedAt: 99).cursor,
            atDelivered: Fixtures.event(14, committedAt: 99), issuedAt: Fixtures.event(14).cursor,
            atDoubted: Fixtures.event(12, committedAt: 99))
        #expect(feed.storeRead(rewound).rewound == Fixtures.event(14, committedAt: 99).cursor)
        #expect(feed.received(Fixtures.events(12...14, committedAt: 99)).deliver.isEmpty)
        #expect(!feed.awaitingHistoryCheck && feed.owedRead == nil)
        #expect(FeedSequencerTests.ids(feed.received([Fixtures.event(15, committedAt: 99)])) == [15])
    }

    /// The same doubt named again (a relay re-sending its batches) does not void the read already
    /// asked for: otherwise a stream of copies would hold delivery read after read.
    @Test func theSameDoubtAgainDoesNotVoidTheReadInFlight() {
        var feed = FeedSequencerTests.subscribed()
        _ = feed.received(Fixtures.events(11...14))
        let copy = Fixtures.event(12, committedAt: 99)
        _ = feed.received([copy])
        let taken = feed.takeRead()
        _ = feed.received([copy])  // re-sent while the read is in flight
        let read = FeedSequencer.StoreRead(
            events: [], isFull: false, newest: Fixtures.event(14).cursor, atDelivered: Fixtures.event(14),
            issuedAt: taken?.after, atDoubted: Fixtures.event(12))
        #expect(feed.storeRead(read).rewound == nil)
        #expect(!feed.awaitingHistoryCheck, "settled by the read in flight")
        #expect(FeedSequencerTests.ids(feed.received(Fixtures.events(15...15))) == [15])
    }
}
