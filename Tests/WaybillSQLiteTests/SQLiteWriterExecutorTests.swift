import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

/// `writeExecutor`: tasks that prefer it run on the writer thread between transactions, so their
/// `write` costs no thread hand-off; their writes still share transactions; a closed store sends
/// them to the global executor instead of stranding them.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteWriterExecutorTests {
    @Test func aTaskPreferringTheWriterRunsOnItsThreadBeforeAndAfterItsWrite() async throws {
        try await withStore { store, _ in
            let executor = try #require(store.writeExecutor)
            let (before, id, after) = try await Task(executorPreference: executor) {
                let before = store.isOnWriterThread
                let id = try await store.write { tx in try tx.insertCompany(name: "On the writer").id }
                return (before, id, store.isOnWriterThread)
            }.value
            #expect(before && after)
            #expect(try await store.read { tx in try tx.company(id)?.name } == "On the writer")
            // Without the preference a task runs elsewhere.
            #expect(await Task { store.isOnWriterThread }.value == false)
        }
    }

    /// Tasks queued behind a busy writer run, queue their writes, and those writes commit as one batch.
    @Test func writesOfWriterTasksStillShareATransaction() async throws {
        try await withStore { store, _ in
            let executor = try #require(store.writeExecutor)
            let before = store.writerStatistics.committedTransactions
            let holding = Atomic<Bool>(false)
            let gate = Task {
                try await store.write { _ in
                    holding.store(true, ordering: .relaxed)
                    spin { store.pendingWriteCount >= 10 }
                }
            }
            while !holding.load(ordering: .relaxed) { try await Task.sleep(for: .milliseconds(1)) }
            let tasks = (0..<10).map { n in
                Task(executorPreference: executor) {
                    try await store.write { tx in try tx.insertCompany(name: "C\(n)").id }
                }
            }
            try await gate.value
            var ids: [CompanyID] = []
            for task in tasks { ids.append(try await task.value) }
            #expect(Set(ids).count == 10)
            // The gate's transaction, then the ten writes in one.
            #expect(store.writerStatistics.committedTransactions == before + 2)
        }
    }

    @Test func aClosedStoreSendsWriterTasksToTheGlobalExecutor() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let executor = try #require(store.writeExecutor)
        store.close()
        let outcome = await Task(executorPreference: executor) { () -> String in
            do {
                _ = try await store.write { tx in try tx.insertCompany(name: "Late") }
                return "written"
            } catch {
                return "\(error)"
            }
        }.value
        #expect(outcome == "\(StoreError.unavailable("the store is closed"))")
    }
}
