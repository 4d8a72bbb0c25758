import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// A thrown error of the test's own, to tell it from the store's.
private struct Refused: Error, Equatable {}

/// `body`'s value or error, kept for later checks.
private func outcome<T>(_ body: () async throws -> T) async -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch {
        return .failure(error)
    }
}

@Suite(.timeLimit(.minutes(1))) struct SQLiteOrderStoreConcurrencyTests {
    @Test func twoHundredConcurrentWritesGetIDsOneToTwoHundred() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let before = store.writerStatistics.committedTransactions
            let ids = try await withThrowingTaskGroup(of: [EventID].self) { group in
                for _ in 0..<200 {
                    group.addTask {
                        try await store.write { tx in try tx.appendEvents([createdEvent(order)]).map(\.id) }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(ids.sorted() == (1...200).map { EventID(Int64($0)) })
            let stored = try await store.read { tx in try tx.events(after: .zero, limit: 500).map(\.id) }
            #expect(stored == (1...200).map { EventID(Int64($0)) })
            let transactions = store.writerStatistics.committedTransactions - before
            #expect(transactions >= 4 && transactions <= 200, "at most 64 writes per transaction")
        }
    }

    @Test func aThrowingClosureInABatchLosesOnlyItsOwnWork() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let before = store.writerStatistics.committedTransactions
            let gate = try await holdWriter(store, until: 20)
            let results = await withTaskGroup(of: (Int, Result<EventID, any Error>).self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let result = await outcome { () async throws -> EventID in
                            try await store.write { tx in
                                let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "\(index)"))
                                let id = try tx.appendEvents([createdEvent(order)])[0].id
                                if index == 7 { throw Refused() }
                                return id
                            }
                        }
                        return (index, result)
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            try await gate.value

            #expect(store.writerStatistics.committedTransactions == before + 2, "the gate, then one batch of 20")
            for (index, result) in results {
                if index == 7 {
                    #expect(throws: Refused.self) { try result.get() }
                } else {
                    #expect(throws: Never.self) { try result.get() }
                }
            }
            let stored = try await store.read { tx in
                (
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows.map(\.number),
                    try tx.events(after: .zero, limit: 100).map(\.id)
                )
            }
            #expect(stored.0.count == 19)
            #expect(!stored.0.contains("7"))
            #expect(stored.1 == (1...19).map { EventID(Int64($0)) }, "the rolled-back closure left no gap")
        }
    }

    /// A write that runs alone (no savepoint: the common case at low rates) and throws loses its
    /// work and nothing else; the next write commits and takes the next event id.
    @Test func aLoneThrowingClosureLosesItsWorkAndTheNextWriteCommits() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let before = store.writerStatistics.committedTransactions
            let refused = await outcome {
                try await store.write { tx in
                    let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "lost"))
                    _ = try tx.appendEvents([createdEvent(order)])
                    throw Refused()
                }
            }
            #expect(throws: Refused.self) { try refused.get() }
            #expect(store.writerStatistics.committedTransactions == before, "the lone write was rolled back")
            let kept = try await store.write { tx in
                let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "kept"))
                return try tx.appendEvents([createdEvent(order)])[0].id
            }
            #expect(store.writerStatistics.committedTransactions == before + 1)
            let stored = try await store.read { tx in
                (
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows.map(\.number),
                    try tx.events(after: .zero, limit: 100).map(\.id)
                )
            }
            #expect(stored.0 == ["kept"])
            #expect(stored.1 == [kept])
            #expect(kept == EventID(1), "the rolled-back write left no gap")
        }
    }

    @Test func aFailedCommitFailsEveryWriteOfTheBatch() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let gate = try await holdWriter(store, until: 5)
            let results = await withTaskGroup(of: Result<Order, any Error>.self) { group in
                for index in 0..<5 {
                    group.addTask {
                        await outcome { () async throws -> Order in
                            try await store.write { tx in
                                if index == 2 {
                                    // A deferred foreign key is only checked at COMMIT: the
                                    // closure succeeds, the shared COMMIT fails.
                                    try (tx as! SQLiteOrderStore.Transaction).db.executeScript(
                                        "PRAGMA defer_foreign_keys = ON")
                                    return try tx.insertOrder(
                                        sampleOrder(in: fixture.acme.id, number: "bad", driver: UserID(999)))
                                }
                                return try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "\(index)"))
                            }
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            try await gate.value
            for result in results {
                #expect(throws: StoreError.conflict("a referenced record does not exist")) { try result.get() }
            }
        }
    }

    /// A closure that refused (threw) in a batch whose COMMIT then failed gets `.unavailable`, not
    /// its refusal: it may have rested on an earlier closure's work that was undone (a 412 against
    /// a version that never committed), and a caller would drop an action or keep that answer.
    @Test func aRefusalInABatchThatFailedToCommitIsReportedAsUnavailable() async throws {
        struct Refused: Error {}
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let gate = try await holdWriter(store, until: 3)
            let results = await withTaskGroup(of: (Int, Result<Order, any Error>).self) { group in
                for index in 0..<3 {
                    group.addTask {
                        (index, await outcome { () async throws -> Order in
                            try await store.write { tx in
                                if index == 1 { throw Refused() }
                                try (tx as! SQLiteOrderStore.Transaction).db.executeScript("PRAGMA defer_foreign_keys = ON")
                                return try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "bad\(index)", driver: UserID(999)))
                            }
                        })
                    }
                }
                return await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            try await gate.value
            let refused = try #require(results[1])
            #expect(throws: StoreError.self) { try refused.get() }
            if case .failure(let error) = refused {
                guard case .unavailable? = error as? StoreError else {
                    Issue.record("the refusal was answered for a batch that never committed: \(error)")
                    return
                }
            }
            #expect(
                try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows }
                    == [])
            // The writer recovered: the next write commits.
            _ = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
        }
    }

    @Test func twoStoresOnOneFileBothWriteWithUniqueIDs() async throws {
        try await withStore { first, path in
            let second = try SQLiteOrderStore(path: path, readerCount: 1)
            defer { second.close() }
            let fixture = try await Fixture.seed(first)
            let order = try await second.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let ids = try await withThrowingTaskGroup(of: EventID.self) { group in
                for index in 0..<100 {
                    let store = index.isMultiple(of: 2) ? first : second
                    group.addTask { try await store.write { tx in try tx.appendEvents([createdEvent(order)])[0].id } }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(ids.sorted() == (1...100).map { EventID(Int64($0)) })
            #expect(try await first.read { tx in try tx.events(after: .zero, limit: 500).count } == 100)
            #expect(try await second.read { tx in try tx.newestEventID() } == EventID(100))
        }
    }
}
