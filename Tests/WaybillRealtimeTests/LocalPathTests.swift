import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// The local path (docs/DESIGN.md): with an in-process broker, the store's commit observer
/// hands this process's events straight to the hub feed, and the relay only moves its cursor.
@Suite(.timeLimit(.minutes(1)))
struct LocalPathTests {
    /// A feed on `store` (not yet running) and what it feeds.
    struct Feed {
        let feed: HubFeed
        let broker = ScriptedBroker()
        let target = RecordingTarget()
        let clock = TestClock()

        init(_ store: any OrderStore) {
            feed = HubFeed(broker: broker, store: store, target: target, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
        }

        /// Runs the feed from the store's newest cursor (read now) during `body`.
        func running(on store: any OrderStore, _ body: () async throws -> Void) async throws {
            let subscription = broker.subscribe()
            let start = try await HubFeed.newestCursor(in: store)
            let task = Task { await feed.run(first: subscription, startingAfter: start) }
            defer { task.cancel() }
            #expect(await eventually { feed.isRunning })
            try await body()
            task.cancel()
            await task.value
        }
    }

    /// A relay on `store`, leading on a test clock, with this server's feed the broker's one
    /// subscriber (the local path).
    struct LocalRelay {
        let relay: OutboxRelay
        let broker = ScriptedBroker()
        let clock = TestClock()
        let running: Task<Void, Never>

        static func leading(on store: any OrderStore, configuration: OutboxRelay.Configuration = .init()) async -> LocalRelay {
            let local = LocalRelay(store: store, configuration: configuration)
            #expect(await eventually { local.relay.isLeading })
            return local
        }

        private init(store: any OrderStore, configuration: OutboxRelay.Configuration) {
            broker.subscriptions.withLock { $0 = 1 }
            let relay = OutboxRelay(
                store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, configuration: configuration,
                clock: clock)
            self.relay = relay
            running = Task { await relay.run() }
        }

        /// Commits one event and hands it over as the store's commit observer does on the local path.
        func deliver(on store: any OrderStore) async throws -> [StoredEvent] {
            try await store.write { tx in
                let events = try tx.appendEvents([Fixtures.orderEvent()])
                relay.delivered(events)
                return events
            }
        }

        func stop() async {
            running.cancel()
            await running.value
        }
    }

    @Test func eventsCommittedHereReachTheHubWithoutTheBroker() async throws {
        try await withStore { store in
            let local = Feed(store)
            try await local.running(on: store) {
                let events = try await store.append(3)
                local.feed.committedHere(events)
                #expect(local.target.ids == [1, 2, 3], "delivered by the call, not by a task later")
                local.broker.send(.events(events))  // the same events by the broker as well: dropped by id
                let more = try await store.append(1)
                local.feed.committedHere(more)
                #expect(await eventually { local.target.ids.count >= 4 })
                #expect(local.target.ids == [1, 2, 3, 4])
            }
        }
    }

    @Test func eventsCommittedBeforeTheFeedRunsAreDeliveredWhenItStarts() async throws {
        try await withStore { store in
            let local = Feed(store)
            let start = try await HubFeed.newestCursor(in: store)
            let events = try await store.append(2)
            local.feed.committedHere(events)  // the server's first write can come before `run`
            #expect(local.target.ids.isEmpty)
            let subscription = local.broker.subscribe()
            let task = Task { await local.feed.run(first: subscription, startingAfter: start) }
            defer { task.cancel() }
            #expect(await eventually { local.target.ids == [1, 2] })
            task.cancel()
            await task.value
        }
    }

    /// Another process (`waybill seed`) committed between two of this process's commits: the gap is
    /// read from the store at once, without waiting for a tick (the test clock never moves).
    @Test func aGapBetweenLocalCommitsIsReadFromTheStoreAtOnce() async throws {
        try await withStore { store in
            let local = Feed(store)
            try await local.running(on: store) {
                local.feed.committedHere(try await store.append(1))
                _ = try await store.append(2)  // not observed: another process's commit
                local.feed.committedHere(try await store.append(1))
                #expect(await eventually { local.target.ids == [1, 2, 3, 4] })
                #expect(local.target.rewinds.isEmpty)
            }
        }
    }

    @Test(arguments: [1, 2])
    func theRelayMovesItsCursorPastDeliveredEventsAndPublishesThemOnlyForOtherSubscribers(subscriptions: Int) async throws {
        try await withStore { store in
            let broker = ScriptedBroker(), clock = TestClock()
            broker.subscriptions.withLock { $0 = subscriptions }  // 2: another server in this process
            let relay = OutboxRelay(store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
            let running = Task { await relay.run() }
            defer { running.cancel() }
            #expect(await eventually { relay.isLeading })
            // Another process's commit first: published from the store, and the relay then waits.
            let first = try await store.append(1)
            relay.notify()
            #expect(await eventually { broker.publishedIDs == first.map(\.id) })
            // The round the notice may still owe ends (a store read after the commit below would
            // publish the delivered events: seen once in three runs on a busy machine).
            #expect(await eventually { !clock.deadlines.isEmpty }, "the relay waits on the clock")
            try await Task.sleep(for: .milliseconds(200))
            // Handed over inside the transaction, not after it as the store's observer does: so no
            // relay round that was still owed a wake-up can find them in the store first.
            let delivered = try await store.write { tx in
                let events = try tx.appendEvents((0..<3).map { _ in Fixtures.orderEvent() })
                relay.delivered(events)
                return events
            }
            #expect(try await eventually {
                await clock.advance(by: .milliseconds(100))
                return try await store.read { tx in try tx.relayedThrough() } == delivered[2].id
            })
            if subscriptions == 1 {
                #expect(broker.publishedIDs == first.map(\.id), "the feed has the delivered ones already")
            } else {
                #expect(broker.publishedIDs == (first + delivered).map(\.id), "the other server's feed needs them")
            }
            // What another process commits is still published, from the store.
            let foreign = try await store.append(1)
            relay.notify()
            #expect(await eventually {
                await clock.advance(by: .milliseconds(100))
                return broker.publishedIDs.suffix(1) == foreign.map(\.id)
            })
            running.cancel()
            await running.value
        }
    }

    /// On the local path the relay runs a round, and saves its cursor, about once a second
    /// (`deliveredRoundInterval`), not every 100 ms (`persistInterval`): each save was a write
    /// transaction, each round wake-ups, for events every socket had already.
    @Test func theLocalPathSavesTheRelaysCursorAboutOnceASecond() async throws {
        try await withStore { store in
            let local = await LocalRelay.leading(on: store)
            defer { local.running.cancel() }
            let saved = try await store.read { tx in try tx.relayedThrough() }
            // The relay waits for its next poll: armed before the time below starts to count.
            #expect(await eventually { !local.clock.deadlines.isEmpty })
            // A write every 100 ms of the relay's clock. The first one's round runs at once (the
            // wake-up), too early to save (the relay has just saved); the next is a second later.
            var last = try await local.deliver(on: store)
            for _ in 0..<9 {
                try await Task.sleep(for: .milliseconds(20))
                await local.clock.advance(by: .milliseconds(100))
                last = try await local.deliver(on: store)
                try await Task.sleep(for: .milliseconds(20))
                #expect(try await store.read { tx in try tx.relayedThrough() } == saved, "no round within 900 ms")
            }
            #expect(try await eventually {
                await local.clock.advance(by: .milliseconds(100))
                return try await store.read { tx in try tx.relayedThrough() } == last[0].id
            })
            #expect(local.broker.publishedIDs.isEmpty, "nothing published: the feed had them")
            await local.stop()
        }
    }

    /// Another process's commit (`waybill seed`) after this node's last one is found by a store
    /// read at most `pollInterval` after the last local round: the local path's pause counts toward
    /// it. Before, the pause and then a whole poll interval passed (found by a review).
    @Test func anotherProcesssLastCommitWaitsNoLongerThanAPollAfterTheLocalRound() async throws {
        try await withStore { store in
            let local = await LocalRelay.leading(on: store, configuration: .init(pollInterval: .seconds(1)))
            defer { local.running.cancel() }
            let clock = local.clock, start = clock.now
            func at(_ milliseconds: Int) -> TestClock.Instant { start.advanced(by: .milliseconds(milliseconds)) }
            // The first poll's timer fires; the next poll's (at 2 s) is then the only one.
            #expect(await eventually { clock.deadlines.contains(at(1000)) })
            await clock.advance(to: at(1000))
            #expect(await eventually { clock.deadlines.contains(at(2000)) })
            // A local round at 1.5 s saves the cursor and pauses until 2.5 s; the poll's timer
            // fires during the pause; the next local round, at 2.5 s, pauses until 3.5 s.
            await clock.advance(to: at(1500))
            _ = try await local.deliver(on: store)
            #expect(await eventually { clock.deadlines.contains(at(2500)) })
            await clock.advance(to: at(2000))
            _ = try await local.deliver(on: store)
            await clock.advance(to: at(2500))
            #expect(await eventually { clock.deadlines.contains(at(3500)) })
            let theirs = try await store.append(1)  // not handed over: another process's
            await clock.advance(to: at(3500))
            // The clock stands at the pause's end: only that round can read them.
            #expect(
                await eventually { local.broker.publishedIDs == theirs.map(\.id) },
                "read when the pause ends, the poll interval after the last round")
            await local.stop()
        }
    }

    /// A relay stopped during the local path's pause saves its cursor past what was delivered
    /// meanwhile: the next start does not publish up to a second of events again.
    @Test func aRelayStoppedDuringThePauseSavesPastWhatWasDeliveredMeanwhile() async throws {
        try await withStore { store in
            let local = await LocalRelay.leading(on: store)
            defer { local.running.cancel() }
            let second = local.clock.now.advanced(by: .seconds(1))
            // Its first poll's wait is armed (a second on): its rounds are done.
            #expect(await eventually { local.clock.deadlines.contains(second) })
            _ = try await local.deliver(on: store)
            // Its round ran (too soon after the start to save) and pauses: two sleepers a second on.
            #expect(await eventually { local.clock.deadlines.filter { $0 == second }.count == 2 })
            let meanwhile = try await local.deliver(on: store)
            await local.stop()
            #expect(try await store.read { tx in try tx.relayedThrough() } == meanwhile[0].id)
            #expect(local.broker.publishedIDs.isEmpty)
        }
    }
}
