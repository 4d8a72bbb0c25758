import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

@Suite(.timeLimit(.minutes(2))) struct ConcurrencyConformanceTests {
    /// `writeNow` commits only where the store can do it at once without waiting (SQLite: on the
    /// thread running its idle writer's work inline; `InlineWritesTests` has that side). Anywhere
    /// else it runs nothing and says so, on every backend: a request then takes its task.
    @Test(arguments: Backend.allCases) func writeNowOffTheWritersInlineScopeRunsNothing(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let ran = Atomic<Bool>(false)
            let written = try store.writeNow { tx in
                ran.store(true, ordering: .relaxed)
                return try tx.insertOrder(sampleOrder(in: fixture.acme.id))
            }
            let closureRan = ran.load(ordering: .relaxed)
            #expect(written == nil)
            #expect(!closureRan, "the closure never ran")
            let orders = try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery()) }
            #expect(orders.rows.isEmpty)
        }
    }

    @Test(arguments: Backend.allCases) func readersNeverSeeAnOrderWithoutItsEvent(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for stream in 0..<4 {
                    group.addTask {
                        for index in 0..<25 {
                            try await store.write { tx in
                                let order = try tx.insertOrder(
                                    sampleOrder(in: fixture.acme.id, number: "\(stream)-\(index)"))
                                _ = try tx.appendEvents([createdEvent(order)])
                            }
                        }
                    }
                }
                for _ in 0..<2 {
                    group.addTask {
                        for _ in 0..<40 {
                            let seen = try await store.read { tx in
                                (
                                    orders: try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows.count,
                                    newest: try tx.newestEventID(),
                                    events: try tx.events(after: .zero, limit: 1000).count
                                )
                            }
                            #expect(seen.orders == seen.events)
                            #expect(seen.newest.rawValue == Int64(seen.events))
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.read { tx in try tx.newestEventID() } == EventID(100))
        }
    }

    @Test(arguments: Backend.allCases) func concurrentWritesGetDenseIDsInCommitOrder(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let ids = try await withThrowingTaskGroup(of: [EventID].self) { group in
                for _ in 0..<100 {
                    group.addTask {
                        try await store.write { tx in try tx.appendEvents([createdEvent(order)]).map(\.id) }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(ids.sorted() == (1...100).map { EventID(Int64($0)) })
            let stored = try await store.read { tx in try tx.events(after: .zero, limit: 500).map(\.id) }
            #expect(stored == (1...100).map { EventID(Int64($0)) })
        }
    }

    /// Concurrent read-modify-writes of one order: each reads it, adds a document and bumps the
    /// version. Without a row lock (or a single writer) some would overwrite others. (24, not more:
    /// they serialize on the row by design, and the last must still finish inside the store's
    /// 4.5 s call deadline on a loaded 2-core machine.)
    @Test(arguments: Backend.allCases) func concurrentReadModifyWritesOfOneOrderLoseNoUpdate(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let writers = 24
            let versions = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<writers {
                    group.addTask {
                        try await store.write { tx in
                            guard var current = try tx.order(order.id!, in: fixture.acme.id) else {
                                throw StoreError.notFound
                            }
                            current.documents.append(Document(name: "photo-\(index).jpg", kind: "photo", createdAt: t0))
                            current.version += 1
                            current.updatedAt = t0 + Double(index)
                            return try tx.updateOrder(current).version
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(versions.sorted() == Array(2...(writers + 1)), "every write saw the one before it")
            let final = try await store.read { tx in try tx.order(order.id!, in: fixture.acme.id) }
            #expect(final?.version == writers + 1)
            #expect(final?.documents.count == writers + 1)
            let names = Set(final?.documents.map(\.name) ?? [])
            #expect((0..<writers).allSatisfy { names.contains("photo-\($0).jpg") })
        }
    }
}
