import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

@Suite struct SQLiteOrderStoreLifecycleTests {
    /// The WAL checkpointer has its own thread and connection: closing the store stops it too.
    @Test func closingTheStoreStopsItsCheckpointer() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        #expect(store.isCheckpointerRunning)
        store.close()
        #expect(!store.isCheckpointerRunning)
    }

    @Test func aClosedStoreIsUnavailable() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        store.close()
        store.close()
        await #expect(throws: StoreError.unavailable("the store is closed")) {
            try await store.read { tx in try tx.newestEventID() }
        }
        await #expect(throws: StoreError.unavailable("the store is closed")) {
            try await store.write { tx in try tx.insertCompany(name: "Late") }
        }
    }

    @Test func aHandleUsedAfterItsClosureIsRefused() async throws {
        /// Smuggles the handle out, which the API is designed to prevent.
        final class Leak: @unchecked Sendable { var reader: (any StoreReader)? }
        try await withStore { store, _ in
            let leak = Leak()
            try await store.read { tx in leak.reader = tx }
            #expect(throws: StoreError.self) { try leak.reader?.newestEventID() }
        }
    }

    @Test func closingFromInsideAWriteFinishesThatWriteWithoutDeadlock() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        // The same path `deinit` takes when the last reference drops on the writer thread.
        let company = try await store.write { tx in
            let company = try tx.insertCompany(name: "Acme")
            store.close()
            return company
        }
        await #expect(throws: StoreError.unavailable("the store is closed")) {
            try await store.write { tx in try tx.insertCompany(name: "Late") }
        }
        let reopened = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { reopened.close() }
        #expect(try await reopened.read { tx in try tx.company(company.id) } == company)
    }

    @Test func aWriterBlockedPastTheBusyTimeoutIsUnavailableWhileReadsGoOn() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1, busyTimeout: .milliseconds(50))
        defer { store.close() }
        let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }

        // Another process holds the write lock.
        let other = try SQLiteConnection(path: database.path)
        defer { other.close() }
        try other.executeScript("BEGIN IMMEDIATE")
        let error = await #expect(throws: StoreError.self) {
            try await store.write { tx in try tx.insertCompany(name: "Blocked") }
        }
        guard case .unavailable = error else {
            Issue.record("expected unavailable, got \(String(describing: error))")
            return
        }
        #expect(try await store.read { tx in try tx.company(company.id) } == company, "WAL readers never wait")

        try other.executeScript("ROLLBACK")
        _ = try await store.write { tx in try tx.insertCompany(name: "Unblocked") }
    }
}
