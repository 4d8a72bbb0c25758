import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage
import WaybillTesting

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

    /// A database where write-ahead logging cannot work (here SQLite's in-memory one; in use, a file
    /// system without shared memory or locks) is refused at open, with the reason: SQLite keeps
    /// its old journal mode and says so, and the store ran on silently, slower, its readers and
    /// writer blocking each other (a review, 2026-12-05).
    @Test func aDatabaseThatCannotUseWALIsRefusedAtOpen() {
        #expect {
            _ = try SQLiteOrderStore(path: ":memory:", readerCount: 1)
        } throws: { error in
            "\(error)".contains("cannot use write-ahead logging (journal mode memory)")
        }
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

    /// While another process holds the write lock, a write waits for it up to the busy timeout in
    /// all, counted from when it was queued. Before, each batch of up to 64 writes waited the whole
    /// timeout in turn: writes queued behind a waiting one waited for it first, then for their own
    /// (here: 150 writes behind one took up to four timeouts).
    @Test func writesQueuedBehindALockWaitFailAfterTheirOwnTimeoutNotAfterEveryBatchBeforeThem() async throws {
        let timeout = Duration.seconds(2)
        try await Self.withStoreBehindAnotherWriter(busyTimeout: timeout) { store, other in
            let first = Task { try await Self.timedWrite(store, name: "First") }
            try await Task.sleep(for: .milliseconds(200))  // the first batch is waiting for the lock
            let behind = try await withThrowingTaskGroup(of: (Duration, (any Error)?).self) { group in
                for index in 0..<150 { group.addTask { try await Self.timedWrite(store, name: "Behind \(index)") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let firstOutcome = try await first.value
            for (_, error) in behind + [firstOutcome] {
                guard case .unavailable? = error as? StoreError else {
                    Issue.record("expected unavailable, got \(String(describing: error))")
                    return
                }
            }
            let waits = behind.map(\.0)
            let longest = try #require(waits.max()), shortest = try #require(waits.min())
            // Before: up to 3.9 timeouts. 3.4, not 2.5: a run beside the parallel suite on two
            // cores once took 2.8 (2026-12-07).
            #expect(longest < timeout * 3.4, "the longest wait was \(longest)")
            #expect(shortest > timeout - .milliseconds(500), "each write waits for the lock, the shortest \(shortest)")
        }
    }

    /// A batch whose wait ran out fails only the writes whose own wait is spent: one queued later
    /// keeps what is left of its wait, and commits if the lock is freed within it.
    @Test func aWriteQueuedDuringAnotherWriteLockWaitKeepsTheRestOfItsOwnWait() async throws {
        // The later write keeps 9 s of its wait after the first fails: room for a busy runner to
        // resume this test and free the lock (1 s was not, on CI; 2 s was not in a stress run
        // beside two busy loops, 2026-12-07; 4 s was not in a run of the whole group, 2026-12-08,
        // where the pool starved for about 7 s). 5 s of the first's wait are left to queue it.
        try await Self.withStoreBehindAnotherWriter(busyTimeout: .seconds(14)) { store, other in
            let first = Task { try await Self.timedWrite(store, name: "First") }
            try await Task.sleep(for: .seconds(9))
            let later = Task { try await Self.timedWrite(store, name: "Later") }
            let (_, firstError) = try await first.value  // its wait ran out while the later one's goes on
            guard case .unavailable? = firstError as? StoreError else {
                Issue.record("expected unavailable, got \(String(describing: firstError))")
                return
            }
            try other.executeScript("ROLLBACK")  // within the later write's wait
            let (_, laterError) = try await later.value
            #expect(laterError == nil, "got \(String(describing: laterError))")
        }
    }

    /// A store with `busyTimeout`, while another connection (another process) holds the write lock
    /// from the start; `body` may release it (`ROLLBACK` on `other`).
    private static func withStoreBehindAnotherWriter(
        busyTimeout: Duration, _ body: (SQLiteOrderStore, SQLiteConnection) async throws -> Void
    ) async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1, busyTimeout: busyTimeout)
        defer { store.close() }
        let other = try SQLiteConnection(path: database.path)
        defer { other.close() }
        try other.executeScript("BEGIN IMMEDIATE")
        try await body(store, other)
    }

    /// The live path's reads (`urgentRead`) neither wait behind the reads queued before them nor
    /// for a reader to come free: behind a reconnect storm's replays and list fetches they held
    /// delivery back. The store keeps a reader for them.
    @Test func anUrgentReadRunsWhileEveryReaderIsBusyAndReadsAreQueued() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { store.close() }
        final class Ran: Sendable {
            let names = Mutex<[String]>([])
            let held = Mutex(true)
        }
        let gate = DispatchSemaphore(value: 0), ran = Ran(), started = Moment()
        let blocker = Task {
            try await store.read { _ in
                started.come()
                _ = gate.wait(timeout: .now() + 20)
                ran.held.withLock { $0 = false }
            }
        }
        defer { gate.signal() }
        #expect(await eventually { started.hasCome }, "the one reader is held")
        // Queued one by one: each is in the queue before the next is asked for.
        var reads: [Task<Void, any Error>] = []
        for (index, name) in ["list 1", "list 2", "replay"].enumerated() {
            reads.append(Task { try await store.read { _ in ran.names.withLock { $0.append(name) } } })
            #expect(await eventually { store.queuedReads == index + 1 }, "queued behind the held reader")
        }
        let sawHeld = try await store.urgentRead { _ in
            ran.names.withLock { $0.append("feed") }
            return ran.held.withLock { $0 }
        }
        #expect(sawHeld, "the urgent read ran while the reader was still held")
        #expect(store.queuedReads == 3, "the other reads still wait for their reader")
        gate.signal()
        try await blocker.value
        for read in reads { try await read.value }
        let names = ran.names.withLock { $0 }
        #expect(names == ["feed", "list 1", "list 2", "replay"], "\(names)")
    }

    /// One write's wait and its failure (`nil`: it committed).
    private static func timedWrite(_ store: SQLiteOrderStore, name: String) async throws -> (Duration, (any Error)?) {
        let start = ContinuousClock.now
        do {
            _ = try await store.write { tx in try tx.insertCompany(name: name) }
            return (start.duration(to: .now), nil)
        } catch {
            return (start.duration(to: .now), error)
        }
    }
}
