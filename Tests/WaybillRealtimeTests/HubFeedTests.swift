import Foundation
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillStorage
import WaybillTesting

/// The feed against a real SQLite store and a scripted broker, on a test clock.
@Suite(.timeLimit(.minutes(1)))
struct HubFeedTests {
    /// A feed test: drives the feed through its broker and clock, watches its target.
    typealias FeedBody = (
        _ store: any OrderStore, _ broker: ScriptedBroker, _ target: RecordingTarget, _ clock: TestClock
    ) async throws -> Void

    /// Runs a feed on a fresh store from its newest cursor; `body` drives it.
    static func withFeed(_ body: FeedBody) async throws {
        try await withStore { store in try await withFeed(on: store, body) }
    }

    /// Runs a feed on `store` from its newest cursor; `body` drives it.
    static func withFeed(on store: any OrderStore, _ body: FeedBody) async throws {
        try await withRunningFeed(on: store) { _, broker, target, clock in try await body(store, broker, target, clock) }
    }

    /// Runs a feed on `store` (logging to `logger`) from the newest cursor of `newestFrom` (the store
    /// by default); `body` gets the feed itself too.
    static func withRunningFeed(
        on store: any OrderStore, newestFrom origin: (any OrderStore)? = nil, logger: Logger = Fixtures.logger,
        _ body: (HubFeed, ScriptedBroker, RecordingTarget, TestClock) async throws -> Void
    ) async throws {
        let broker = ScriptedBroker(), target = RecordingTarget(), clock = TestClock()
        let feed = HubFeed(broker: broker, store: store, target: target, metrics: Metrics(), logger: logger, clock: clock)
        let subscription = broker.subscribe()
        let start = try await HubFeed.newestCursor(in: origin ?? store)
        let running = Task { await feed.run(first: subscription, startingAfter: start) }
        defer { running.cancel() }
        try await body(feed, broker, target, clock)
        running.cancel()
        await running.value
    }

    /// With the broker lost and the store down, the feed polls (and fails) every 100 ms: the first
    /// failure is logged, then every 100th, and the recovery once; a line per poll flooded the log.
    @Test func aStoreThatStaysDownIsNotLoggedAtEveryPoll() async throws {
        try await withStore { real in
            let store = CountingStore(real, failReads: true)
            let lines = Mutex<[String]>([])
            let logger = Logger(minimum: .info, sink: { line in lines.withLock { $0.append(line) } })
            try await Self.withRunningFeed(on: store, newestFrom: real, logger: logger) { _, broker, _, clock in
                broker.send(.lost)
                for _ in 0..<150 {
                    let before = store.reads
                    await clock.advance(by: .milliseconds(100))
                    #expect(await eventually { store.reads > before }, "a read at every tick")
                }
                let warnings = lines.withLock { $0.filter { $0.contains("feed store read failed") } }
                #expect(warnings.count == 2, "the first failure and the 101st: \(warnings.count)")
                // The live path's reads go ahead of a reconnect storm's (`urgentRead`).
                #expect(store.urgentReads == store.reads)
            }
        }
    }

    /// A message the broker could not read (`.skipped`: a newer node's format in a rolling upgrade)
    /// makes the feed read the store at once: before, what it held waited for the next batch's gap
    /// or the 5 s check (no tick here: the test clock stands still).
    @Test func aSkippedBrokerMessageIsReadFromTheStoreAtOnce() async throws {
        try await withStore { store in
            try await Self.withRunningFeed(on: store) { feed, broker, target, _ in
                broker.send(.subscribed)
                #expect(await eventually { feed.isQuiet }, "the read after `.subscribed` is done")
                _ = try await store.append(2)  // published in a message this node could not read
                broker.send(.skipped)
                #expect(await eventually { target.ids == [1, 2] })  // the clock stands still: no check can bring them
            }
        }
    }

    /// An event of a kind a newer release added, committed by a newer node in a rolling upgrade and
    /// published in a message this node could not read, comes from the store under its name, and
    /// the events after it follow: the store read failed on it, so this node delivered nothing
    /// more until it was upgraded.
    @Test func anEventOfANewerReleasesKindIsDeliveredWithTheOnesAfterIt() async throws {
        try await withStore { store in
            try await Self.withRunningFeed(on: store) { feed, broker, target, _ in
                broker.send(.subscribed)
                #expect(await eventually { feed.isQuiet }, "the read after `.subscribed` is done")
                var newer = Fixtures.orderEvent()
                newer.type = try #require(OrderEventType(rawValue: "order_archived"))
                _ = try await (store as any OrderStore).write { [newer] tx in try tx.appendEvents([newer]) }
                _ = try await store.append(1)
                broker.send(.skipped)
                #expect(await eventually { target.ids == [1, 2] })  // the clock stands still: no check can bring them
                #expect(target.types == ["order_archived", "order_updated"])
            }
        }
    }

    @Test func aGapInWhatTheBrokerGaveIsReadFromTheStore() async throws {
        try await Self.withFeed { store, broker, target, _ in
            let events = try await store.append(5)
            broker.send(.events(Array(events[3...])))  // 1...3 never arrived
            #expect(await eventually { target.ids == [1, 2, 3, 4, 5] })
            broker.send(.events(events))  // a relay that republishes
            let more = try await store.append(1)
            broker.send(.events(more))
            #expect(await eventually { target.ids.count >= 6 })
            #expect(target.ids == [1, 2, 3, 4, 5, 6])
        }
    }

    @Test func whileTheBrokerIsLostNewEventsComeFromTheStoreThenNoDuplicatesWhenItIsBack() async throws {
        try await Self.withFeed { store, broker, target, clock in
            broker.send(.lost)
            let first = try await store.append(2)
            await clock.advance(by: .milliseconds(100))
            #expect(await eventually { target.ids == [1, 2] })
            let second = try await store.append(2)
            await clock.advance(by: .milliseconds(100))
            #expect(await eventually { target.ids == [1, 2, 3, 4] })
            let third = try await store.append(1)  // published while the broker was away: never delivered by it
            broker.send(.subscribed)
            #expect(await eventually { target.ids == [1, 2, 3, 4, 5] })
            broker.send(.events(first + second + third))  // a late republish overlapping everything
            let live = try await store.append(1)
            broker.send(.events(live))
            #expect(await eventually { target.ids.count >= 6 })
            #expect(target.ids == [1, 2, 3, 4, 5, 6])
            #expect(target.rewinds.isEmpty)
        }
    }

    /// Redis restarted: the subscription came back before the relay's publisher, which reconnects
    /// on a backoff of its own (1.2 s later in a run of `scripts/bench.sh cluster paced 1000 20
    /// redis`, and every socket's delivery p99 was 1 s in that run). Events committed meanwhile
    /// are published by no one: the feed reads the store at every tick until a broker batch
    /// delivers, then trusts the broker again.
    @Test func eventsCommittedBeforeThePublisherIsBackComeFromTheStore() async throws {
        try await withStore { real in
            let store = CountingStore(real)
            try await Self.withRunningFeed(on: store, newestFrom: real) { feed, broker, target, clock in
                broker.send(.subscribed)
                #expect(await eventually { feed.isQuiet })
                let beforeLost = store.finishedReads
                broker.send(.lost)
                #expect(await eventually { store.finishedReads > beforeLost })
                let beforeBack = store.finishedReads
                broker.send(.subscribed)
                #expect(await eventually { store.finishedReads > beforeBack }, "the read that closes the gap")
                let unpublished = try await real.append(2)
                await clock.advance(by: .milliseconds(100))
                #expect(await eventually { target.ids == [1, 2] }, "read at the tick: \(target.ids)")
                #expect(!feed.isQuiet, "still polling: no batch has delivered")
                broker.send(.events(unpublished))  // the publisher is back: its backlog, delivered already
                let live = try await real.append(1)
                broker.send(.events(live))
                #expect(await eventually { target.ids == [1, 2, 3] })
                #expect(await eventually { feed.isQuiet }, "a batch delivered: back on the broker")
            }
        }
    }

    /// The feed's log lines go out after its lock is released: a line whose write blocks (a full
    /// stderr pipe) must not hold the lock that every commit of the node goes through
    /// (`committedHere`, on the thread that committed).
    @Test func aLogLineThatBlocksDoesNotHoldTheFeedsLock() async throws {
        try await withStore { original in
            let events = try await original.append(3)
            try await withStore { restored in
                try await restored.append(2)  // a rewound history: the feed logs an error for it
                let release = DispatchSemaphore(value: 0), logging = Moment(), committed = Moment()
                let logger = Logger(minimum: .info, sink: { line in
                    guard line.contains("history rewound") else { return }
                    logging.come()
                    _ = release.wait(timeout: .now() + 20)
                })
                let broker = ScriptedBroker(), target = RecordingTarget(), clock = TestClock()
                let feed = HubFeed(broker: broker, store: restored, target: target, metrics: Metrics(), logger: logger, clock: clock)
                let subscription = broker.subscribe()
                // The feed runs on a thread of its own: the blocked line holds that thread, not one
                // of the two the cooperative pool has on a 2-core machine (held there, with one
                // more busy, every other test of the process stalled until its 20 s ran out).
                let executor = ThreadExecutor(name: "log-feed")
                defer { executor.shutdown() }
                let running = Task(executorPreference: executor) {
                    await feed.run(first: subscription, startingAfter: events[2].cursor)
                }
                defer {
                    release.signal()
                    running.cancel()
                }
                broker.send(.lost)  // polling reads the store, which has rewound
                #expect(await eventually { logging.hasCome }, "the rewind is being logged")
                Thread {
                    feed.committedHere([])
                    committed.come()
                }.start()
                #expect(await eventually(timeout: .seconds(5)) { committed.hasCome }, "a commit goes through while the line is written")
                release.signal()
                #expect(await eventually { target.rewinds.count == 1 })
                running.cancel()
                await running.value
            }
        }
    }

    @Test func aRewoundHistoryIsReportedOnceAndDeliveryContinuesFromTheNewNewest() async throws {
        try await withStore { original in
            let events = try await original.append(3)
            try await withStore { restored in
                // A "restored" store whose event 2 is a different event and whose history ends there.
                try await restored.append(2)
                let broker = ScriptedBroker(), target = RecordingTarget(), clock = TestClock()
                let feed = HubFeed(broker: broker, store: restored, target: target, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
                let subscription = broker.subscribe()
                let running = Task { await feed.run(first: subscription, startingAfter: events[2].cursor) }
                defer { running.cancel() }
                broker.send(.lost)  // polling reads the store at once and on every tick
                #expect(await eventually { target.rewinds.count == 1 })
                let newest = try await HubFeed.newestCursor(in: restored)
                #expect(target.rewinds == [newest])
                let next = try await restored.append(1)
                await clock.advance(by: .milliseconds(100))
                #expect(await eventually { target.ids == [next[0].id.rawValue] })
                #expect(target.rewinds.count == 1)
                running.cancel()
                await running.value
            }
        }
    }

    @Test func theHistoryIsCheckedWhileTheBrokerDelivers() async throws {
        try await withStore { original in
            try await original.append(3)
            try await withStore { restored in
                try await restored.append(2)
                let store = SwitchableStore(original)
                let broker = ScriptedBroker(), target = RecordingTarget(), clock = TestClock()
                let feed = HubFeed(
                    broker: broker, store: store, target: target, metrics: Metrics(), logger: Fixtures.logger,
                    clock: clock)
                let subscription = broker.subscribe()
                let start = try await HubFeed.newestCursor(in: store)
                let running = Task { await feed.run(first: subscription, startingAfter: start) }
                defer { running.cancel() }
                // The read that follows `.subscribed` must be done before the store changes: on a busy
                // machine it can start late, read the restored store and find the rewind at once.
                #expect(await eventually { feed.isQuiet })
                store.switchTo(restored)  // the database under the node goes back to event 2
                // Tick by tick (the feed counts ticks): one big advance may let the feed's loop run
                // fewer times than the ticks it covers when the machine is busy.
                for _ in 0..<40 { await clock.advance(by: .milliseconds(100)) }
                #expect(target.rewinds.isEmpty, "the broker path reads no history until the check is due")
                let newest = try await HubFeed.newestCursor(in: restored)
                var ticks = 0
                while target.rewinds.isEmpty, ticks < 100 {
                    await clock.advance(by: .milliseconds(100))
                    ticks += 1
                    _ = await eventually(timeout: .milliseconds(50)) { !target.rewinds.isEmpty }
                }
                #expect(target.rewinds == [newest])
                #expect(ticks <= 20, "the check came about 5 s after the last one, not much later")
                running.cancel()
                await running.value
            }
        }
    }
}
