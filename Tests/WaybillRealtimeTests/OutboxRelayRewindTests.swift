import Foundation
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
@testable import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// A history rewound under a leader that keeps its lease, with new commits already past its cursor
/// when it next looks (a restore on the same server): the new events continue the cursor's *ids*.
/// The relay compares the fingerprints of what it published since its last store read and relays
/// again from the first event that changed, so every feed sees an id it delivered with another
/// fingerprint (and resets its sockets) instead of taking the new history as a continuation.
@Suite(.timeLimit(.minutes(1)))
struct OutboxRelayRewindTests {
    /// A relay over `store` that has published `events` (committed before it started, so no wake-up
    /// is left over) and saved its cursor: from here on it waits for a hand-over or the clock.
    static func quietRelay(
        _ store: SwitchableStore, _ broker: ScriptedBroker, _ clock: TestClock, published events: [StoredEvent],
        configuration: OutboxRelay.Configuration = .init()
    ) async throws -> (OutboxRelay, Task<Void, Never>) {
        let relay = OutboxRelay(
            store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, configuration: configuration,
            clock: clock)
        let running = Task { await relay.run() }
        #expect(await eventually { broker.publishedIDs == events.map(\.id) })
        #expect(
            try await eventually {
                await clock.advance(by: .milliseconds(100))
                return try await store.read { tx in try tx.relayedThrough() } == events.last?.id
            })
        return (relay, running)
    }

    @Test func newEventsPastTheCursorOfARewoundHistoryAreRelayedFromTheEventThatChanged() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
                let old = try await original.append(3)
                let (_, running) = try await Self.quietRelay(store, broker, clock, published: old)
                defer { running.cancel() }
                let new = try await restored.append(5)  // 1...5, none of them the old 1...3
                store.switchTo(restored)
                #expect(
                    await eventually {
                        await clock.advance(by: .milliseconds(200))
                        return broker.publishedCursors.count >= 6
                    }, "the new 3, 4 and 5 are relayed at the next poll")
                #expect(broker.publishedCursors == old.map(\.cursor) + new[2...].map(\.cursor))
                running.cancel()
                await running.value
            }
        }
    }

    /// The fast path publishes this node's commits without a store read; the next read compares
    /// the event it continued from.
    @Test func aRewindUnderTheFastPathIsFoundByTheNextCheck() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
                let old = try await original.append(3)
                let (relay, running) = try await Self.quietRelay(store, broker, clock, published: old)
                defer { running.cancel() }
                let rewound = try await restored.append(3)  // the restore: 1...3 again, other events
                store.switchTo(restored)
                let mine = try await store.append(1)  // committed here: 4, continuing the cursor's id
                relay.committed(mine)
                #expect(await eventually { broker.publishedCursors.count == 4 }, "the fast path publishes it unread")
                #expect(broker.publishedCursors.last == mine[0].cursor)
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

    /// The restore point lies inside what the fast path published since the last check (a
    /// point-in-time restore to "just before the incident"): the first event that changed is found,
    /// not only the newest or the one the stretch started from (found by a review of the first
    /// version, which compared only the latter).
    @Test func aRestorePointInsideTheUncheckedStretchIsFound() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-backup-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let originalPath = directory.appendingPathComponent("original.sqlite").path
        let backupPath = directory.appendingPathComponent("backup.sqlite").path
        let original = try await runBlocking { try SQLiteOrderStore(path: originalPath) }
        defer { original.close() }
        do {
                let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
                let old = try await original.append(3)
                let (relay, running) = try await Self.quietRelay(store, broker, clock, published: old)
                defer { running.cancel() }
                let fourth = try await original.append(1)  // 4, published unread
                relay.committed(fourth)
                // The backup holds 1...4, as stored (the same events and secrets: a copy of the file).
                try await runBlocking {
                    let connection = try SQLiteConnection(path: originalPath)
                    defer { connection.close() }
                    try connection.execute("VACUUM INTO '\(backupPath)'")
                }
                let rest = try await original.append(2)  // 5 and 6, published unread
                relay.committed(rest)
                #expect(await eventually { broker.publishedCursors.count == 6 })
                let restored = try await runBlocking { try SQLiteOrderStore(path: backupPath) }
                defer { restored.close() }
                let kept = try await restored.read { tx in try tx.events(after: .zero, limit: 10) }
                #expect(kept.map(\.cursor) == (old + fourth).map(\.cursor))
                // The commits after the restore are other events under 5, 6 and 7.
                let after = try await restored.append(3, order: 2)
                store.switchTo(restored)
                #expect(
                    await eventually {
                        await clock.advance(by: .milliseconds(200))
                        return broker.publishedCursors.count >= 9
                    })
                #expect(Array(broker.publishedCursors.dropFirst(6)) == after.map(\.cursor), "5, 6 and 7 of the new history")
                running.cancel()
                await running.value
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
                let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
                var configuration = OutboxRelay.Configuration(pollInterval: .seconds(3600))  // no poll here
                configuration.historyCheckInterval = .seconds(1)
                let old = try await original.append(3)
                let (relay, running) = try await Self.quietRelay(
                    store, broker, clock, published: old, configuration: configuration)
                defer { running.cancel() }
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
    /// and closes its sockets, once.
    @Test func aFeedResetsWhenTheRelayGoesBackBelowWhatItDelivered() async throws {
        try await withStore { original in
            try await withStore { restored in
                let store = SwitchableStore(original)
                let broker = InProcessBroker(), clock = TestClock(), target = RecordingTarget()
                let feed = HubFeed(
                    broker: broker, store: store, target: target, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
                let subscription = broker.subscribe()
                let start = try await HubFeed.newestCursor(in: store)
                let feeding = Task { await feed.run(first: subscription, startingAfter: start) }
                defer { feeding.cancel() }
                #expect(await eventually { feed.isQuiet })
                try await original.append(3)
                let relay = OutboxRelay(store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, clock: clock)
                let relaying = Task { await relay.run() }
                defer { relaying.cancel() }
                #expect(await eventually { target.ids == [1, 2, 3] })
                #expect(
                    try await eventually {
                        await clock.advance(by: .milliseconds(100))
                        return try await original.read { tx in try tx.relayedThrough() } == EventID(3)
                    })
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
                for _ in 0..<10 { await clock.advance(by: .milliseconds(200)) }
                #expect(target.rewinds.count == 1, "the new history's events re-sent after it are no second rewind")
                relaying.cancel()
                feeding.cancel()
                await relaying.value
                await feeding.value
            }
        }
    }

    /// A relay held up for a while is handed many commits at once: they go out `batchSize` at a
    /// time, as the slow path sends (subscribers refuse a batch past `BrokerWireFormat.maxEvents`;
    /// found by a review).
    @Test func manyHandedOverEventsGoOutABatchAtATime() async throws {
        try await withStore { original in
            let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
            var configuration = OutboxRelay.Configuration()
            configuration.batchSize = 4
            let old = try await original.append(2)
            let (relay, running) = try await Self.quietRelay(store, broker, clock, published: old, configuration: configuration)
            defer { running.cancel() }
            let many = try await original.append(10)
            relay.committed(many)
            #expect(await eventually { broker.publishedIDs.count == 12 })
            #expect(broker.publishedIDs == (old + many).map(\.id))
            #expect(broker.batchSizes.allSatisfy { $0 <= 4 }, "\(broker.batchSizes)")
            running.cancel()
            await running.value
        }
    }
}
