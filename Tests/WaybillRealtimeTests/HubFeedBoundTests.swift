import Dispatch
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// The feed's input queue is bounded: while the feed is stuck, broker batches past the bound are
/// dropped (and counted), and the gap they leave is read from the store, so every event still
/// reaches the hub exactly once and in order.
@Suite(.timeLimit(.minutes(1)))
struct HubFeedBoundTests {
    /// Blocks its first delivery until released (a hub whose service thread is stuck).
    final class StuckTarget: FeedTarget {
        let release = DispatchSemaphore(value: 0)
        private let state = Mutex<(ids: [Int64], entered: Bool, rewinds: [EventCursor])>(([], false, []))
        func deliver(_ events: [StoredEvent]) {
            let first = state.withLock { s in
                defer { s.entered = true }
                return !s.entered
            }
            if first { _ = release.wait(timeout: .now() + 10) }
            state.withLock { $0.ids += events.map(\.id.rawValue) }
        }
        func historyRewound(to newest: EventCursor) { state.withLock { $0.rewinds.append(newest) } }
        var entered: Bool { state.withLock { $0.entered } }
        var ids: [Int64] { state.withLock { $0.ids } }
        var rewinds: [EventCursor] { state.withLock { $0.rewinds } }
    }

    /// A feed with an input bound of 4, on a test clock that stands still.
    static func boundedFeed(
        broker: ScriptedBroker, store: any OrderStore, target: any FeedTarget, metrics: Metrics, clock: TestClock = TestClock()
    ) -> HubFeed {
        var configuration = HubFeed.Configuration()
        configuration.maxPendingInputs = 4
        return HubFeed(
            broker: broker, store: store, target: target, metrics: metrics, logger: Fixtures.logger,
            clock: clock, configuration: configuration)
    }

    /// Runs a feed on `store` with an input bound of 4, delivering to a `StuckTarget`, until `body`
    /// returns; `body` starts once the read after the first `.subscribed` is over.
    static func withStuckFeed(
        on store: any OrderStore, _ body: (ScriptedBroker, StuckTarget, Metrics) async throws -> Void
    ) async throws {
        let broker = ScriptedBroker(), target = StuckTarget(), metrics = Metrics()
        let feed = boundedFeed(broker: broker, store: store, target: target, metrics: metrics)
        let subscription = broker.subscribe()
        let start = try await HubFeed.newestCursor(in: store)
        // The feed runs on threads of its own: the stuck delivery blocks one of them, not one
        // of the two the cooperative pool has on a 2-core machine.
        let executor = ThreadExecutor(name: "stuck-feed")
        defer { executor.shutdown() }
        let running = Task(executorPreference: executor) {
            await feed.run(first: subscription, startingAfter: start)
        }
        defer { running.cancel() }
        // The read after the first `.subscribed` (nothing to deliver yet) is over. It waits up
        // to 20 s: this once missed a 5 s window in a clean-clone CI run, with 450 other tests
        // sharing two cores (not reproduced alone or beside busy loops).
        #expect(
            await eventually(timeout: .seconds(20)) {
                metrics.render(outboxLagSeconds: 0).contains("waybill_feed_store_reads_total 1\n")
            })
        try await body(broker, target, metrics)
        running.cancel()
        await running.value
    }

    @Test func batchesPastTheBoundAreDroppedAndReadFromTheStore() async throws {
        try await withStore { store in
            try await Self.withStuckFeed(on: store) { broker, target, metrics in
                let events = try await store.append(21)
                broker.send(.events([events[0]]))
                #expect(await eventually { target.entered })
                for event in events.dropFirst() { broker.send(.events([event])) }
                #expect(await eventually { metrics.overflows(of: .feedInputs) == 16 })
                target.release.signal()
                #expect(await eventually { target.ids.count >= 21 })
                #expect(target.ids == Array(1...21))
            }
        }
    }

    /// The one batch that told of a rewind (event 1 again, with another fingerprint) is dropped while
    /// the feed is stuck; the batches kept continue the ids as if nothing happened. The drop alone
    /// makes the feed compare the history with the store before it delivers them, so the rewind is
    /// seen now, not at the next periodic check minutes later.
    @Test func aDroppedBatchMakesTheFeedCheckTheHistoryBeforeDeliveringMore() async throws {
        try await withStore { original in
            try await withStore { restoredStore in
                let restored = try await restoredStore.append(5)  // ids 1...5, none of them the original's
                let store = SwitchableStore(original)
                try await Self.withStuckFeed(on: store) { broker, target, metrics in
                    let delivered = try await original.append(1)
                    broker.send(.events(delivered))
                    #expect(await eventually { target.entered })
                    store.switchTo(restoredStore)  // restored under the node while the hub is stuck
                    for event in restored { broker.send(.events([event])) }  // 1 is dropped, 2...5 kept
                    #expect(await eventually { metrics.overflows(of: .feedInputs) == 1 })
                    target.release.signal()
                    #expect(await eventually { target.rewinds.count == 1 })
                    #expect(target.rewinds == [restored[4].cursor])
                    #expect(target.ids == [1], "nothing of the restored history is delivered as if it continued the old one")
                }
            }
        }
    }

    /// A feed with an input bound of 4 on `real` (read through a `HeldStore`), subscribed and
    /// quiet, then busy with a store read held on a skipped message: `body` fills its queue.
    static func withHeldRead(
        _ body: (HubFeed, ScriptedBroker, HeldStore, RecordingTarget, Metrics, TestClock, SQLiteOrderStore) async throws -> Void
    ) async throws {
        try await withStore { real in
            let store = HeldStore(real), broker = ScriptedBroker(), target = RecordingTarget(), metrics = Metrics()
            let clock = TestClock()
            let feed = Self.boundedFeed(broker: broker, store: store, target: target, metrics: metrics, clock: clock)
            let subscription = broker.subscribe()
            let start = try await HubFeed.newestCursor(in: real)
            let running = Task { await feed.run(first: subscription, startingAfter: start) }
            defer { running.cancel() }
            broker.send(.subscribed)
            #expect(await eventually { feed.isQuiet })
            store.holdReads()
            broker.send(.skipped)  // the feed reads the store: held there
            #expect(await eventually { store.heldReads == 1 })
            try await body(feed, broker, store, target, metrics, clock, real)
            running.cancel()
            await running.value
        }
    }

    /// Redis restarted while the feed's queue was full: its `.lost` and `.subscribed` were both
    /// among the inputs dropped. The feed must still wait for a broker batch before it trusts the
    /// broker again (the relay's publisher may come back later than the subscription), not take the
    /// replayed `.subscribed` for a broker that never went away (found by a review).
    @Test func anOutageWhoseWordsWereDroppedStillWaitsForABrokerBatch() async throws {
        try await Self.withHeldRead { feed, broker, store, target, metrics, clock, real in
            broker.send(.lost)
            broker.send(.subscribed)
            for _ in 0..<6 { broker.send(.skipped) }  // the queue overflows: `.lost` and `.subscribed` go first
            #expect(await eventually { metrics.overflows(of: .feedInputs) == 4 })
            store.releaseReads()
            #expect(await eventually { feed.isAwaitingBrokerBatch }, "the replayed `.subscribed` waits for a batch")
            let unpublished = try await real.append(1)  // committed while the publisher is away
            await clock.advance(by: .milliseconds(100))
            #expect(await eventually { target.ids == unpublished.map(\.id.rawValue) }, "read at the tick: \(target.ids)")
        }
    }

    /// A local commit that leaves a gap wakes the feed to read the store (`.readOwed`, once while
    /// owed). When that wake-up was among the inputs dropped from the bounded queue, the flag that
    /// says one is on its way stayed set, and no later gap woke the feed again: only the ticks
    /// (here the test clock stands still: never).
    @Test func aDroppedWakeUpDoesNotKeepLaterGapsFromWakingTheFeed() async throws {
        try await Self.withHeldRead { feed, broker, store, target, metrics, _, real in
            let first = try await real.append(2)
            feed.committedHere([first[1]])  // a gap (1): the feed is woken (`.readOwed` queued)
            for _ in 0..<6 { broker.send(.skipped) }  // the queue overflows: the wake-up is dropped
            // All forwarded before the read goes on: the wake-up, oldest, went first of the three.
            #expect(await eventually { metrics.overflows(of: .feedInputs) == 3 })
            store.releaseReads()
            #expect(await eventually { target.ids == [1, 2] })
            #expect(await eventually { feed.isQuiet })
            let second = try await real.append(2)
            feed.committedHere([second[1]])  // another gap (3): it must wake the feed again
            #expect(await eventually { target.ids == [1, 2, 3, 4] }, "\(target.ids)")
        }
    }
}
