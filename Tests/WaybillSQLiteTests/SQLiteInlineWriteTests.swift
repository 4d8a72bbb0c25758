import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillTesting

/// `SQLiteWriterExecutor.runHere`: a task started there runs on the calling thread — its code, its
/// commit and its code after — when the writer thread is idle and the commit cannot wait; anything
/// else goes to the writer thread, and nothing is left behind.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteInlineWriteTests {
    private static func thread() -> UInt { UInt(pthread_self()) }

    /// A store whose checkpointer stays out of the way (a checkpoint closes the gate until the
    /// writer thread commits again, which the tests below would otherwise race).
    private func withQuietStore<T>(_ body: (SQLiteOrderStore, String) async throws -> T) async throws -> T {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .seconds(3600), checkpoint: SQLiteCheckpointer.passive)
        defer { store.close() }
        return try await body(store, database.path)
    }

    /// What one task started in `runHere` did, and on which threads.
    private final class Run: Sendable {
        let outcome = Mutex<(before: UInt, inside: UInt, after: UInt)?>(nil)
        let failure = Mutex<String?>(nil)
        var isDone: Bool { outcome.withLock { $0 != nil } || failure.withLock { $0 != nil } }
    }

    /// Waits until the writer thread has let go of its connection: a write's caller resumes before
    /// the writer ends its batch, and on two busy cores the next `runHere` could find it still held.
    private func writerIsIdle(_ executor: any WriterExecutor) async -> Bool {
        guard let executor = executor as? SQLiteWriterExecutor else { return false }
        return await eventually { executor.connection.ifFree { _ in true } != nil }
    }

    /// Starts `operation` on `executor` as the server does in `runHere`: at once when `here` (and
    /// `immediately`), else queued on the executor (the way a caller that ignores `here` does).
    private static func start(
        _ executor: any WriterExecutor, here: Bool, immediately: Bool = true,
        _ operation: @escaping @Sendable () async -> Void
    ) {
        if here && immediately, #available(macOS 26, iOS 26, *) {
            Task.immediate(executorPreference: executor, operation: operation)
        } else {
            Task(executorPreference: executor, operation: operation)
        }
    }

    private func startWrite(
        _ store: SQLiteOrderStore, _ executor: any WriterExecutor, name: String, immediately: Bool = true
    ) -> Run {
        let run = Run()
        executor.runHere { here in
            Self.start(executor, here: here, immediately: immediately) {
                let before = Self.thread()
                do {
                    let inside = try await store.write { tx -> UInt in
                        _ = try tx.insertCompany(name: name)
                        return Self.thread()
                    }
                    run.outcome.withLock { $0 = (before, inside, Self.thread()) }
                } catch {
                    run.failure.withLock { $0 = "\(error)" }
                }
            }
        }
        return run
    }

    @Test func anIdleWritersTaskRunsWhollyOnTheCallingThread() async throws {
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            // The first commit after opening goes to the writer thread (it may write the WAL's header).
            let writer = try await store.write { tx in
                _ = try tx.insertCompany(name: "First")
                return Self.thread()
            }
            let inlineBefore = store.writerStatistics.inlineTransactions
            #expect(await writerIsIdle(executor))
            let caller = Self.thread()
            let run = startWrite(store, executor, name: "Inline")
            let threads = try #require(run.outcome.withLock { $0 }, "the task ended inside runHere")
            #expect(threads.before == caller && threads.inside == caller && threads.after == caller)
            #expect(caller != writer)
            #expect(store.writerStatistics.inlineTransactions == inlineBefore + 1)
            #expect(try rawQuery(path, "SELECT name FROM companies").contains("Inline"), "committed")
        }
    }

    /// The points of the batches a `runHere` ran (`observeBatches`).
    private final class Points: Sendable {
        let seen = Mutex<[WriterBatchPoint]>([])
        func count(_ point: WriterBatchPoint) -> Int { seen.withLock { $0.filter { $0 == point }.count } }
    }

    /// The task's write commits inside the task's own piece (`SQLiteWriterExecutor.commitHere`):
    /// no queued write to commit. Started at once (`Task.immediate`), the piece is not a batch at
    /// all; started the usual way, it is one batch. Queued, the same task took three batches — its
    /// code up to the write, the write's commit, its code after — with a suspension between.
    @Test(arguments: [true, false]) func anInlineTasksWriteCommitsWithinItsOwnPiece(immediately: Bool) async throws {
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            #expect(await writerIsIdle(executor))
            let points = Points()
            #expect(executor.observeBatches { point in points.seen.withLock { $0.append(point) } })
            defer { executor.stopObservingBatches() }
            let inlineBefore = store.writerStatistics.inlineTransactions
            let run = startWrite(store, executor, name: "Direct", immediately: immediately)
            let threads = try #require(run.outcome.withLock { $0 }, "the task ended inside runHere")
            #expect(threads.inside == Self.thread())
            #expect(points.count(.started) == (immediately ? 0 : 1), "pieces: \(points.seen.withLock { $0 })")
            #expect(points.count(.committing) == 0, "no queued write")
            #expect(store.writerStatistics.inlineTransactions == inlineBefore + 1)
            #expect(try rawQuery(path, "SELECT name FROM companies").contains("Direct"), "committed")
        }
    }

    /// A closure that throws inside a write committed at once: its caller gets the error, its
    /// changes are rolled back, and the next write commits as before.
    @Test func anInlineWriteThatThrowsIsRolledBackAndItsCallerGetsTheError() async throws {
        struct Refused: Error {}
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            #expect(await writerIsIdle(executor))
            let failure = Run()
            executor.runHere { here in
                Self.start(executor, here: here) {
                    do {
                        try await store.write { tx in
                            _ = try tx.insertCompany(name: "Undone")
                            throw Refused()
                        }
                        failure.failure.withLock { $0 = "no error" }
                    } catch {
                        failure.failure.withLock { $0 = "\(type(of: error))" }
                    }
                }
            }
            #expect(failure.failure.withLock { $0 } == "Refused", "ended inside runHere with the closure's error")
            let run = startWrite(store, executor, name: "After")
            #expect(run.outcome.withLock { $0 } != nil, "the next one commits inline")
            let names = try rawQuery(path, "SELECT name FROM companies")
            #expect(!names.contains("Undone") && names.contains("After"))
        }
    }

    /// A task started at once that suspends on a read (resumed by a reader thread while this
    /// thread still runs the writer's work) goes on on the writer thread: its write commits there,
    /// nothing waits on the calling thread, and nothing is left behind.
    @Test func aTaskStartedAtOnceThatSuspendsOnAReadWritesOnTheWriterThread() async throws {
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            #expect(await writerIsIdle(executor))
            let caller = Self.thread()
            let run = Run()
            // The read finishes only once the task has suspended on it (`Task.immediate` returned):
            // a read done before that resumed the task from this thread, which then ran its write
            // as its own queued work (seen once under a full suite's load).
            let suspended = Mutex(false)
            executor.runHere { here in
                Self.start(executor, here: here) {
                    let before = Self.thread()
                    do {
                        _ = try await store.read { tx in
                            for _ in 0..<50_000 where !suspended.withLock({ $0 }) { usleep(100) }
                            return try tx.company(CompanyID(1))
                        }
                        let inside = try await store.write { tx -> UInt in
                            _ = try tx.insertCompany(name: "After a read")
                            return Self.thread()
                        }
                        run.outcome.withLock { $0 = (before, inside, Self.thread()) }
                    } catch {
                        run.failure.withLock { $0 = "\(error)" }
                    }
                }
                suspended.withLock { $0 = true }
            }
            #expect(await eventually { run.isDone })
            #expect(run.failure.withLock { $0 } == nil)
            let threads = try #require(run.outcome.withLock { $0 })
            #expect(threads.before == caller, "started at once")
            #expect(threads.inside != caller, "written by the writer thread")
            #expect(try rawQuery(path, "SELECT name FROM companies").contains("After a read"))
        }
    }

    @Test func theFirstWriteAfterOpeningGoesToTheWriterThread() async throws {
        try await withQuietStore { store, _ in
            let executor = try #require(store.writerExecutor)
            let run = startWrite(store, executor, name: "First")
            #expect(await eventually { run.isDone })
            let threads = try #require(run.outcome.withLock { $0 })
            #expect(threads.inside != Self.thread(), "committed on the writer thread")
            #expect(store.writerStatistics.inlineTransactions == 0)
        }
    }

    /// Another process holds the write lock (`waybill seed` beside the server): the caller must not
    /// wait for it. Before the gate, the inline `BEGIN` waited the busy timeout on the calling
    /// thread (every socket of the server), then failed the write.
    @Test func aWriteThatWouldWaitForAnotherProcessesLockGoesToTheWriterThread() async throws {
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            let other = try SQLiteConnection(path: path)
            defer { other.close() }
            #expect(await writerIsIdle(executor))  // so the write is tried inline, and handed back
            try other.execute("BEGIN IMMEDIATE")
            let release = ReleaseLater(other, after: 15)
            let run = startWrite(store, executor, name: "Waits")
            #expect(!release.hasReleased, "runHere returned without waiting for the lock")
            #expect(!run.isDone)
            release.releaseNow()
            await release.wait()
            #expect(await eventually { run.isDone })
            #expect(run.failure.withLock { $0 } == nil)
            let threads = try #require(run.outcome.withLock { $0 })
            #expect(threads.inside != Self.thread(), "committed by the writer thread once the lock was free")
            #expect(store.writerStatistics.inlineTransactions == 0)
        }
    }

    /// The writer thread is busy (here: the test holds its connection): `runHere` leaves the work
    /// queued and must wake the writer for it, since its own enqueues woke nobody.
    @Test func workLeftForABusyWriterIsNotStranded() async throws {
        try await withQuietStore { store, _ in
            let executor = try #require(store.writerExecutor as? SQLiteWriterExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            let holding = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
            Thread {
                executor.connection.ifFree(orWait: true) { _ in
                    holding.signal()
                    release.wait()
                }
            }.start()
            holding.wait()
            let run = startWrite(store, executor, name: "Later")
            #expect(!run.isDone)
            release.signal()
            #expect(await eventually { run.isDone })
            #expect(run.failure.withLock { $0 } == nil)
            #expect(store.writerStatistics.inlineTransactions == 0)
        }
    }

    /// A job the service thread runs for the writer closes the store (its last reference going
    /// away there would do the same): `close` must not wait for the writer thread, which needs the
    /// connection that job holds.
    @Test func closingTheStoreInsideAnInlineTaskDoesNotWaitForTheWriter() async throws {
        try await withQuietStore { store, _ in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            #expect(await writerIsIdle(executor))
            // On a thread of its own (as the service thread): a regression deadlocks it, not the test.
            let closed = Run(), caller = Run()
            Thread {
                caller.outcome.withLock { $0 = (Self.thread(), 0, 0) }
                executor.runHere { here in
                    Self.start(executor, here: here) {
                        _ = try? await store.write { tx in try tx.insertCompany(name: "Then closed") }
                        store.close()
                        closed.outcome.withLock { $0 = (Self.thread(), 0, 0) }
                    }
                }
            }.start()
            #expect(await eventually { closed.isDone }, "closed without waiting for the writer")
            #expect(closed.outcome.withLock { $0?.before } == caller.outcome.withLock { $0?.before }, "inline")
            #expect(await eventually { !store.isCheckpointerRunning })
            await #expect(throws: StoreError.self) { try await store.write { _ in 0 } }
        }
    }

    /// A write asked for inline after the store was closed (by the same task) is refused, as on
    /// the writer thread: committed at once, it would have gone through.
    @Test func anInlineWriteAfterTheStoreClosedIsRefused() async throws {
        try await withQuietStore { store, path in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            #expect(await writerIsIdle(executor))
            let run = Run()
            Thread {
                executor.runHere { here in
                    Self.start(executor, here: here) {
                        store.close()
                        do {
                            _ = try await store.write { tx in try tx.insertCompany(name: "After close") }
                            run.failure.withLock { $0 = "written" }
                        } catch {
                            run.failure.withLock { $0 = "\(error)" }
                        }
                    }
                }
            }.start()
            #expect(await eventually { run.isDone })
            #expect(run.failure.withLock { $0 }?.contains("closed") == true, "\(run.failure.withLock { $0 } ?? "")")
            #expect(try !rawQuery(path, "SELECT name FROM companies").contains("After close"))
        }
    }

    @Test func aTaskStartedOutsideRunHereStillRunsOnTheWriterThread() async throws {
        try await withQuietStore { store, _ in
            let executor = try #require(store.writerExecutor)
            _ = try await store.write { tx in try tx.insertCompany(name: "First") }
            let inside = try await Task(executorPreference: executor) {
                try await store.write { _ in Self.thread() }
            }.value
            #expect(inside != Self.thread())
            #expect(store.writerStatistics.inlineTransactions == 0)
        }
    }

    /// The store's checkpoints move the gate: after one, the next write goes to the writer thread
    /// (it may start the WAL over and sync its header), even though the writer is idle.
    @Test func theFirstWriteAfterACheckpointGoesToTheWriterThread() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .milliseconds(20),
            checkpointPolicy: CheckpointPolicy(pageThreshold: 1, maxAge: .milliseconds(20)),
            checkpoint: SQLiteCheckpointer.passive)
        defer { store.close() }
        let executor = try #require(store.writerExecutor)
        // The checkpointer's first look checkpoints at once (a WAL an earlier process left); after
        // it, the next is due only after a commit.
        #expect(await eventually { store.checkpointerActivity.attempts >= 1 })
        let attempts = store.checkpointerActivity.attempts
        _ = try await store.write { tx in try tx.insertCompany(name: "First") }
        let walAfterFirst = try #require(store.checkpointerActivity.walPages)
        #expect(await eventually { store.checkpointerActivity.attempts > attempts }, "a checkpoint ran since")
        // …and is over: `ticks` moves at the end of the look that ran it.
        let ticks = store.checkpointerActivity.ticks
        #expect(await eventually { store.checkpointerActivity.ticks > ticks + 1 })
        // A commit that writes nothing (no WAL frames) leaves the WAL for the next one to start
        // over: it must not open the gate.
        _ = try await store.write { _ in 0 }
        let run = startWrite(store, executor, name: "AfterCheckpoint")
        #expect(await eventually { run.isDone })
        let threads = try #require(run.outcome.withLock { $0 })
        #expect(threads.inside != Self.thread(), "committed on the writer thread")
        #expect(store.writerStatistics.inlineTransactions == 0)
        // It was the commit that started the WAL over: the WAL holds only its own pages (as many as
        // the first commit's, which also began on a WAL copied back), not the first's and its own.
        let walAfterRestart = try #require(store.checkpointerActivity.walPages)
        #expect(walAfterRestart <= walAfterFirst, "\(walAfterRestart) pages after, \(walAfterFirst) before")
    }

    /// The gate: a transaction begins inline only after a writer-thread commit that began with no
    /// checkpoint since (the first commit after a checkpoint may start the WAL over and sync it).
    @Test func theGateOpensOnlyAfterAWriterCommitSinceTheLastCheckpoint() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let walPages = WALPages()
        try db.executeScript("PRAGMA journal_mode = WAL")
        db.reportWALPages(to: walPages)
        try db.execute("CREATE TABLE t (x INTEGER)")
        let gate = InlineCommitGate(busyTimeoutMilliseconds: 5000, walPages: walPages)
        func begins() -> Bool {
            guard gate.beginInline(on: db) else { return false }
            try? db.execute("ROLLBACK")
            return true
        }
        /// A writer-thread commit, with or without WAL frames, begun at `begin`.
        func writerCommits(frames: Bool, _ begin: InlineCommitGate.WriterBegin? = nil) throws {
            let begin = begin ?? gate.writerBegins()
            try db.execute("BEGIN IMMEDIATE")
            if frames { try db.execute("INSERT INTO t VALUES (1)") }
            try db.execute("COMMIT")
            gate.writerCommitted(begin)
        }
        #expect(!begins(), "no writer commit yet")
        try writerCommits(frames: false)
        #expect(!begins(), "a commit that wrote nothing does not open it")
        try writerCommits(frames: true)
        #expect(begins())
        #expect(begins(), "and stays open")
        let during = gate.checkpointing { () -> InlineCommitGate.WriterBegin in
            #expect(!begins(), "not while a checkpoint runs")
            return gate.writerBegins()
        }
        #expect(!begins(), "nor after one")
        try writerCommits(frames: true, during)
        #expect(!begins(), "a writer commit that began during the checkpoint does not open it")
        try writerCommits(frames: true)
        #expect(begins())

        // Busy: the gate is open but another connection holds the lock; it fails at once and
        // leaves the connection's busy timeout as it was.
        let other = try database.openRawConnection()
        defer { other.close() }
        try other.execute("BEGIN IMMEDIATE")
        let release = ReleaseLater(other, after: 15)
        #expect(!begins())
        #expect(!release.hasReleased, "it did not wait for the lock")
        #expect(!db.isInTransaction)
        release.releaseNow()
        await release.wait()
        #expect(begins())
        // The busy timeout is back: a BEGIN behind a lock held for a moment waits for it (on a
        // thread of its own: it blocks).
        try other.execute("BEGIN IMMEDIATE")
        let shortly = ReleaseLater(other, after: 0.2)
        nonisolated(unsafe) let waiting = db
        let began = await onOwnThread { (try? waiting.execute("BEGIN IMMEDIATE")) != nil }
        #expect(began && shortly.hasReleased)
        try db.execute("ROLLBACK")
    }
}

/// Commits `connection`'s open transaction from another thread after `after` seconds, or when the
/// test calls ``releaseNow()``: a holder of the write lock that lets go on its own, so a caller
/// that waited for it would return only after. (Checks made while it holds should be followed by
/// `releaseNow()` and a long `after`: a fixed 2 s hold once ran out on a stalled runner.)
/// Nothing here blocks the test's own thread (Swift's pool has one thread per core here: a test
/// that sleeps on it stalls every other test of the process).
final class ReleaseLater: Sendable {
    private final class Flags: Sendable {
        let released = Atomic<Bool>(false)
        let committed = Atomic<Bool>(false)
    }
    private let flags = Flags()
    private let early = DispatchSemaphore(value: 0)

    init(_ connection: SQLiteConnection, after: TimeInterval = 2) {
        nonisolated(unsafe) let connection = connection  // used by that thread only, until `wait`
        Thread { [flags, early] in
            _ = early.wait(timeout: .now() + after)
            flags.released.store(true, ordering: .sequentiallyConsistent)
            try? connection.execute("COMMIT")
            flags.committed.store(true, ordering: .sequentiallyConsistent)
        }.start()
    }

    var hasReleased: Bool { flags.released.load(ordering: .sequentiallyConsistent) }

    /// Lets go now instead of at `after`.
    func releaseNow() { early.signal() }

    /// Returns once the lock has been let go.
    func wait() async {
        while !flags.committed.load(ordering: .sequentiallyConsistent) { try? await Task.sleep(for: .milliseconds(5)) }
    }
}

/// Runs `body` on a thread of its own (it may block) and returns its result.
func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in Thread { continuation.resume(returning: body()) }.start() }
}
