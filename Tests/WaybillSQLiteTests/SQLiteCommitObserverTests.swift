import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// What the observer was told, batch by batch.
private final class Heard: Sendable {
    private let batches = Mutex<[[EventID]]>([])
    func add(_ events: [StoredEvent]) { batches.withLock { $0.append(events.map(\.id)) } }
    var all: [[EventID]] { batches.withLock { $0 } }
    var ids: [EventID] { all.flatMap { $0 } }
}

private struct Refused: Error {}

/// `observeCommits`: the local path's source (docs/DESIGN.md, "The local path"). The hub
/// feed relies on three promises: every committed event once, in id order, and nothing that was
/// rolled back.
@Suite(.timeLimit(.minutes(1))) struct SQLiteCommitObserverTests {
    private func ids(_ range: ClosedRange<Int64>) -> [EventID] { range.map { EventID($0) } }

    @Test func concurrentWritesAreHeardOnceEachInIdOrder() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let heard = Heard()
            #expect(store.observeCommits { heard.add($0) })
            let before = store.writerStatistics.committedTransactions
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<200 {
                    group.addTask { _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) } }
                }
                try await group.waitForAll()
            }
            // Heard before the writers resumed: nothing to wait for.
            #expect(heard.ids == ids(1...200))
            #expect(heard.all.count == store.writerStatistics.committedTransactions - before, "one call per commit")
        }
    }

    @Test func aClosureThatThrowsInsideABatchIsNotHeard() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let heard = Heard()
            _ = store.observeCommits { heard.add($0) }
            let before = store.writerStatistics.committedTransactions
            let gate = try await holdWriter(store, until: 20)  // the twenty run as one batch
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        _ = try? await store.write { tx in
                            let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "\(index)"))
                            let id = try tx.appendEvents([createdEvent(order)])[0].id
                            if index % 5 == 2 { throw Refused() }
                            return id
                        }
                    }
                }
                try await group.waitForAll()
            }
            try await gate.value
            #expect(store.writerStatistics.committedTransactions == before + 2, "the gate, then one batch of 20")
            let stored = try await store.read { tx in try tx.events(after: .zero, limit: 100) }
            #expect(stored.map(\.id) == ids(1...16))
            #expect(heard.ids == stored.map(\.id), "exactly the committed events, not the four rolled back")
        }
    }

    @Test func aLoneThrowingWriteAndAWriteWithoutEventsAreNotHeard() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let heard = Heard()
            _ = store.observeCommits { heard.add($0) }
            _ = try? await store.write { tx in
                let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "lost"))
                _ = try tx.appendEvents([createdEvent(order)])
                throw Refused()
            }
            _ = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "quiet")) }
            #expect(heard.all.isEmpty)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "kept")) }
            let kept = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            #expect(heard.all == [kept.map(\.id)])
        }
    }

    /// A second server on the same store keeps the relay's path: the first observer stays.
    @Test func aSecondObserverIsRefused() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let first = Heard(), second = Heard()
            #expect(store.observeCommits { first.add($0) })
            #expect(!store.observeCommits { second.add($0) })
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let events = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            #expect(first.ids == events.map(\.id))
            #expect(second.all.isEmpty)
        }
    }

    /// A server that stops lets go of the store: its observer hears no more, and another may be set.
    @Test func aRemovedObserverHearsNothingMoreAndMakesRoomForAnother() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let first = Heard(), second = Heard()
            #expect(store.observeCommits { first.add($0) })
            store.stopObservingCommits()
            #expect(store.observeCommits { second.add($0) })
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let events = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            #expect(first.all.isEmpty)
            #expect(second.ids == events.map(\.id))
        }
    }
}
