import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// A history rewound under a leader that keeps its lease, with new commits already past its cursor
/// when it next looks (a restore on the same server): the new events continue the cursor's *ids*.
/// The relay compares the fingerprint of what it continued from and relays again from the event
/// that changed, so every feed sees an id it delivered with another fingerprint (and resets its
/// sockets) instead of taking the new history as a continuation of the old.
@Suite(.timeLimit(.minutes(1)))
struct OutboxRelayRewindTests {
    @Test func newEventsPastTheCursorOfARewoundHistoryAreRelayedFromTheEventThatChanged() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original)
                let broker = ScriptedBroker(), clock = TestClock()
                let relay = OutboxRelayLeaseTests.relay(store, broker, clock: clock)
                let running = Task { await relay.run() }
                defer { running.cancel() }
                #expect(await eventually { relay.isLeading })
                let old = try await store.append(3)
                relay.notify()
                #expect(await eventually { broker.publishedIDs == old.map(\.id) })
                let new = try await restored.append(5)  // 1...5, none of them the old 1...3
                store.switchTo(restored)
                relay.notify()
                #expect(
                    await eventually { broker.publishedCursors.count >= 6 },
                    "the new 3, 4 and 5 are relayed")
                #expect(broker.publishedCursors == old.map(\.cursor) + new[2...].map(\.cursor))
                running.cancel()
                await running.value
            }
        }
    }

    /// The fast path publishes this node's commits without a store read; the check that follows
    /// within `pollInterval` compares the event it continued from.
    @Test func aRewindUnderTheFastPathIsFoundByTheNextCheck() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original)
                let broker = ScriptedBroker(), clock = TestClock()
                let relay = OutboxRelayLeaseTests.relay(store, broker, clock: clock)
                let running = Task { await relay.run() }
                defer { running.cancel() }
                #expect(await eventually { relay.isLeading })
                let old = try await store.append(3)
                relay.notify()
                #expect(await eventually { broker.publishedIDs == old.map(\.id) })
                let rewound = try await restored.append(3)  // the restore: 1...3 again, other events
                store.switchTo(restored)
                let mine = try await store.append(1)  // committed here: 4, continuing the cursor's id
                relay.committed(mine)
                #expect(await eventually { broker.publishedCursors.count == 4 }, "the fast path publishes it unread")
                #expect(broker.publishedCursors.last == mine[0].cursor)
                // The check is due once per poll interval (1 s by default): the clock moves on.
                #expect(
                    await eventually {
                        await clock.advance(by: .milliseconds(200))
                        return broker.publishedCursors.count >= 6
                    })
                #expect(
                    Array(broker.publishedCursors.dropFirst(4)) == [rewound[2].cursor, mine[0].cursor],
                    "relayed again from the event it had continued from")
                running.cancel()
                await running.value
            }
        }
    }

    /// Nothing rewound: the checks find the same fingerprints and nothing goes out twice.
    @Test func anUnchangedHistoryIsRelayedOnce() async throws {
        try await withStore { store in
            let broker = ScriptedBroker(), clock = TestClock()
            let relay = OutboxRelayLeaseTests.relay(store, broker, clock: clock)
            let running = Task { await relay.run() }
            defer { running.cancel() }
            #expect(await eventually { relay.isLeading })
            var all: [StoredEvent] = []
            for round in 0..<6 {
                let events = try await store.append(2)
                all += events
                if round.isMultiple(of: 2) { relay.committed(events) } else { relay.notify() }
                #expect(await eventually { broker.publishedIDs.count == all.count })
                await clock.advance(by: .milliseconds(600))
            }
            #expect(broker.publishedCursors == all.map(\.cursor))
            running.cancel()
            await running.value
        }
    }

    /// Under steady writes every round has this node's commits to publish and no poll ever
    /// fires; the fast path still stops for a check every `historyCheckInterval`.
    @Test func theFastPathStopsForACheckWhenOneIsDue() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original)
                let broker = ScriptedBroker(), clock = TestClock()
                var configuration = OutboxRelay.Configuration(pollInterval: .seconds(3600))  // no poll here
                configuration.historyCheckInterval = .seconds(1)
                let relay = OutboxRelay(
                    store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger,
                    configuration: configuration, clock: clock)
                let running = Task { await relay.run() }
                defer { running.cancel() }
                #expect(await eventually { relay.isLeading })
                let old = try await store.append(3)
                relay.notify()
                #expect(await eventually { broker.publishedIDs == old.map(\.id) })
                // The cursor is saved 100 ms on; after that the relay waits for the next wake-up only.
                #expect(
                    try await eventually {
                        await clock.advance(by: .milliseconds(100))
                        return try await original.read { tx in try tx.relayedThrough() } == old[2].id
                    })
                let rewound = try await restored.append(3)
                store.switchTo(restored)
                await clock.advance(by: .seconds(1))  // a check is due
                let mine = try await store.append(1)
                relay.committed(mine)
                #expect(await eventually { broker.publishedCursors.count >= 5 })
                #expect(Array(broker.publishedCursors.dropFirst(3)) == [rewound[2].cursor, mine[0].cursor])
                running.cancel()
                await running.value
            }
        }
    }

    /// End to end through a broker: the fast path published the new history's 4 on top of the old
    /// 3, and the feed delivered it as a continuation. The relay's check goes back to 3; the feed,
    /// seeing a delivered id with another fingerprint below what it delivered since, reads that id
    /// and closes its sockets.
    @Test func aFeedResetsWhenTheRelayGoesBackBelowWhatItDelivered() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original)
                let broker = InProcessBroker(), clock = TestClock(), target = RecordingTarget()
                let relay = OutboxRelay(store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
                let feed = HubFeed(
                    broker: broker, store: store, target: target, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
                let subscription = broker.subscribe()
                let start = try await HubFeed.newestCursor(in: store)
                let feeding = Task { await feed.run(first: subscription, startingAfter: start) }
                defer { feeding.cancel() }
                let relaying = Task { await relay.run() }
                defer { relaying.cancel() }
                #expect(await eventually { relay.isLeading && feed.isQuiet })
                try await store.append(3)
                relay.notify()
                #expect(await eventually { target.ids == [1, 2, 3] })
                try await restored.append(3)
                store.switchTo(restored)
                let mine = try await store.append(1)
                relay.committed(mine)
                #expect(await eventually { target.ids == [1, 2, 3, 4] }, "taken as a continuation at first")
                #expect(
                    await eventually {
                        await clock.advance(by: .milliseconds(200))
                        return !target.rewinds.isEmpty
                    })
                #expect(target.rewinds == [mine[0].cursor])
                relaying.cancel()
                feeding.cancel()
                await relaying.value
                await feeding.value
            }
        }
    }
}
