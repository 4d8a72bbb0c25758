import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillTesting

/// `SQLiteOrderStore.writerExecutor`: tasks that prefer it run on the writer thread, between its
/// transactions, and never hang when the store closes under them.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteWriterExecutorTests {
    /// The caller's thread, as a number that can cross the `write` closure's boundary.
    private static func thread() -> UInt { UInt(pthread_self()) }

    @Test func aTaskThatPrefersItRunsOnTheWriterThreadBeforeAndAfterItsWrite() async throws {
        try await withStore { store, _ in
            let executor = try #require(store.writerExecutor)
            let threads = try await Task(executorPreference: executor) {
                let before = Self.thread()
                let inside = try await store.write { tx -> UInt in
                    _ = try tx.insertCompany(name: "Acme")
                    return Self.thread()
                }
                return (before, inside, Self.thread())
            }.value
            #expect(threads.0 == threads.1, "the task's code runs on the thread that runs write closures")
            #expect(threads.2 == threads.1, "and it is resumed there after the commit")
            let plain = try await Task { try await store.write { _ in Self.thread() } }.value
            #expect(plain == threads.1, "the writer thread is one thread")
        }
    }

    @Test func writesOfManyTasksOnTheWriterStillShareTransactions() async throws {
        try await withStore { store, _ in
            let executor = try #require(store.writerExecutor)
            let before = store.writerStatistics.committedTransactions
            let ids = try await withThrowingTaskGroup(of: Int64.self) { group in
                for index in 0..<200 {
                    group.addTask(executorPreference: executor) {
                        try await store.write { tx in try tx.insertCompany(name: "C\(index)").id.rawValue }
                    }
                }
                return try await group.reduce(into: Set<Int64>()) { $0.insert($1) }
            }
            #expect(ids.count == 200, "every write committed once")
            // Every task's code runs before the writes it queued are taken: they meet in batches.
            #expect(store.writerStatistics.committedTransactions - before < 200)
        }
    }

    @Test func aTaskOnAClosedStoresWriterRunsToItsEndWithTheStoresError() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let executor = try #require(store.writerExecutor)
        store.close()
        let outcome = await Task(executorPreference: executor) { () -> String in
            do {
                _ = try await store.write { tx in try tx.insertCompany(name: "Late") }
                return "committed"
            } catch let error as StoreError {
                return "\(error)"
            } catch {
                return "other: \(error)"
            }
        }.value
        #expect(outcome.contains("closed"), "got \(outcome)")
    }

    @Test func theObserverHearsABatchsPointsAndCommittingComesBeforeTheLockWait() async throws {
        // The write waits for the test's lock: with the 5 s default it gave up first on a runner
        // busy with the parallel suite (an extra `.ended`, and "database is locked").
        try await withStore(busyTimeout: .seconds(60)) { store, path in
            let executor = try #require(store.writerExecutor)
            let heard = Mutex<[WriterBatchPoint]>([])
            #expect(executor.observeBatches { point in heard.withLock { $0.append(point) } })
            #expect(!executor.observeBatches { _ in }, "one observer at a time")
            // Another process holds the write lock: the batch's transaction waits for it.
            let other = try SQLiteConnection(path: path)
            defer { other.close() }
            try other.execute("BEGIN IMMEDIATE")
            let write = Task { try await store.write { tx in try tx.insertCompany(name: "Waits").id } }
            // `.committing` arrives while the lock is still held: before the transaction begins.
            #expect(await eventually { heard.withLock { $0.contains(.committing) } })
            #expect(heard.withLock { $0 } == [.started, .committing])
            try other.execute("COMMIT")
            _ = try await write.value
            #expect(await eventually { heard.withLock { $0.last } == .ended(idle: true) })
            #expect(heard.withLock { $0 } == [.started, .committing, .ended(idle: true)])
            executor.stopObservingBatches()
            _ = try await store.write { tx in try tx.insertCompany(name: "Unheard").id }
            #expect(heard.withLock { $0.count } == 3, "nothing after stopObservingBatches")
            #expect(executor.observeBatches { _ in }, "a new observer may be set")
        }
    }

    @Test func aBatchOfOnlyTaskPiecesHasNoCommittingPoint() async throws {
        try await withStore { store, _ in
            let executor = try #require(store.writerExecutor)
            let heard = Mutex<[WriterBatchPoint]>([])
            _ = executor.observeBatches { point in heard.withLock { $0.append(point) } }
            await Task(executorPreference: executor) { _ = 1 + 1 }.value
            #expect(await eventually { heard.withLock { $0.last } == .ended(idle: true) })
            #expect(heard.withLock { $0 } == [.started, .ended(idle: true)])
        }
    }

    /// A checkpoint tail keeps the writer busy with `fsync`s: the batch before it ends as idle, so
    /// its answers go out now, even with more work queued behind (which would otherwise hold the
    /// service thread's wake-up until the next batch, after the syncs).
    @Test func aBatchWithACheckpointTailEndsAsIdleAndRunsTheTailLast() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let queue = JobQueue<WriterWork>()
        #expect(queue.enqueue(.finishCheckpoint), "more work waits behind the batch")
        let heard = Mutex<[String]>([])
        let groupCommit = SQLiteGroupCommit(
            clock: { Date() }, statistics: SQLiteGroupCommit.Statistics(), observer: CommitObserver(),
            gate: InlineCommitGate(busyTimeoutMilliseconds: 0, walPages: WALPages()))
        let executor = SQLiteWriterExecutor(
            queue: queue, groupCommit: groupCommit, batchLimit: 64,
            finishCheckpoint: { _ in heard.withLock { $0.append("tail") } })
        _ = executor.observeBatches { point in heard.withLock { $0.append("\(point)") } }
        executor.perform([.finishCheckpoint], on: db)
        #expect(heard.withLock { $0 } == ["started", "ended(idle: true)", "tail"])

        // Without a tail, the same queue makes the batch end as not idle.
        heard.withLock { $0 = [] }
        executor.perform([], on: db)
        #expect(heard.withLock { $0 } == ["started", "ended(idle: false)"])
    }

    /// `runHere` starts the task at once only when nothing was queued before it: work another
    /// thread queued (a prune, a pool write) is the writer's and goes first, even while the writer
    /// has not taken the connection yet (found by a review, 2026-12-06).
    @Test func runHereStartsAtOnceOnlyWithNothingQueuedBeforeIt() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let queue = JobQueue<WriterWork>()
        let groupCommit = SQLiteGroupCommit(
            clock: { Date() }, statistics: SQLiteGroupCommit.Statistics(), observer: CommitObserver(),
            gate: InlineCommitGate(busyTimeoutMilliseconds: 0, walPages: WALPages()))
        let executor = SQLiteWriterExecutor(queue: queue, groupCommit: groupCommit, batchLimit: 64, finishCheckpoint: { _ in })
        executor.connection.lend(db)  // the writer thread's connection, free: no writer thread here
        var started: [Bool] = []
        executor.runHere { here in started.append(here) }
        #expect(started == [true], "nothing queued: at once")

        let other = Thread { _ = queue.enqueue(.finishCheckpoint) }
        other.start()
        while queue.count < 1 { usleep(100) }
        executor.runHere { here in started.append(here) }
        #expect(started == [true, false], "another thread's work waits: queued behind it")
        #expect(queue.count == 1, "and left to the writer")
    }
}
