internal import CSQLite
public import Foundation
import Synchronization
public import WaybillDomain
public import WaybillStorage

/// The embedded order store: one SQLite file in WAL mode, one writer thread, a pool of readers.
///
/// Nobody holds a connection. ``write(_:)`` queues its closure for the writer thread, which runs
/// up to 64 waiting closures in one SQLite transaction (group commit), each inside its own
/// savepoint: a closure that throws rolls back only its own work, and every caller resumes only
/// once the shared `COMMIT` succeeded. ``read(_:)`` runs its closure on one of `readerCount`
/// reader threads, in a snapshot that sees only committed transactions, concurrently with the
/// writer. Blocking `sqlite3_*` calls never run on Swift's cooperative pool.
///
/// Several stores (or processes, like `waybill seed` next to a running server) may open the same
/// file: writers wait for each other for up to the busy timeout, then fail with
/// `StoreError.unavailable`.
///
/// ```swift
/// let store = try SQLiteOrderStore(path: "data/waybill.sqlite")
/// let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }
/// ```
public final class SQLiteOrderStore: OrderStore {
    /// The most write closures one transaction runs: bounds how long a batch holds the write lock.
    static let groupCommitLimit = 64

    /// The page size of a database file this store creates (SQLite's default is 4 096). An order
    /// write dirties five or six pages (the order row, the event, its group rows and their index),
    /// and a WAL commit writes and checksums every dirty page in full: with 1 KiB pages it writes a
    /// quarter of the bytes into a quarter of the kernel's page-cache pages. Measured on the
    /// benchmark machine (docs/BENCHMARKS.md, 2026-12-03 07:06): SQLite's own cost of such a commit
    /// fell from about 50 to 39 µs, with a 1.5 KB idempotency answer in it from 83 to 77 µs, and
    /// list pages over 100 000 orders read no slower. A file's page size is fixed once it has
    /// tables (and in WAL mode for good), so an existing database keeps its own. The PRAGMA does
    /// leave the size pending on the writer's connection: a `VACUUM` run there would rebuild the
    /// file with 1 KiB pages (nothing runs one today).
    static let newDatabasePageSize = 1024

    private let writeQueue = JobQueue<WriterWork>()
    /// Runs tasks on the writer thread (`writerExecutor`).
    private let executor: SQLiteWriterExecutor
    private let readQueue = JobQueue<ReadJob>()
    /// Reads waiting for a reader thread (tests).
    var queuedReads: Int { readQueue.count }
    private let workers: [SQLiteWorker]
    private let checkpointer: SQLiteCheckpointer
    /// The WAL's size after the writer's last commit, read by the checkpointer.
    private let walPages = WALPages()
    private let clock: @Sendable () -> Date
    private let isClosed = Mutex(false)
    private let leases = LocalLease.Registry()
    /// Counters the writer thread keeps, for tests and metrics.
    let writerStatistics = SQLiteGroupCommit.Statistics()
    /// Who hears of committed events (`observeCommits`).
    private let commitObserver = CommitObserver()

    /// Opens the store at `path`, creating the file and its directory if missing, and applies
    /// pending migrations before returning.
    ///
    /// Blocks the calling thread while the connections open and migrations run (once, at start).
    /// - Parameters:
    ///   - path: the database file.
    ///   - readerCount: reader threads (and connections) serving concurrent `read`s; at least 1.
    ///     One more is kept for `urgentRead`s that find every other reader busy.
    ///   - busyTimeout: how long a write waits for another process's write lock before failing
    ///     with `StoreError.unavailable`.
    ///   - clock: the time stamped on events as `committed_at` (tests pass a fixed clock).
    /// - Throws: `StoreError.unavailable` when the file cannot be opened or migrated.
    public convenience init(
        path: String, readerCount: Int = 4, busyTimeout: Duration = .seconds(5),
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        try self.init(
            path: path, readerCount: readerCount, busyTimeout: busyTimeout, clock: clock,
            checkpoint: SQLiteCheckpointer.passive)
    }

    /// The same, with the checkpoint step (and the WAL's sync) replaced (tests make them fail).
    init(
        path: String, readerCount: Int = 4, busyTimeout: Duration = .seconds(5),
        clock: @escaping @Sendable () -> Date = { Date() }, checkpointInterval: Duration = .milliseconds(250),
        checkpointPolicy: CheckpointPolicy = CheckpointPolicy(), checkpoint: @escaping SQLiteCheckpointer.Checkpoint,
        walSync: @escaping SQLiteCheckpointer.WALSync = SQLiteCheckpointer.syncWAL(at:)
    ) throws {
        self.clock = clock
        let gate = InlineCommitGate(busyTimeoutMilliseconds: Int32(clamping: busyTimeout.milliseconds), walPages: walPages)
        let groupCommit = SQLiteGroupCommit(
            clock: clock, statistics: writerStatistics, observer: commitObserver, gate: gate)
        executor = SQLiteWriterExecutor(
            queue: writeQueue, groupCommit: groupCommit, batchLimit: Self.groupCommitLimit,
            finishCheckpoint: { db in gate.checkpointing { Self.finishCheckpoint(db) } })
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent()
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw StoreError.unavailable("cannot create directory \(directory.path): \(error.localizedDescription)")
        }
        var started: [SQLiteWorker] = []
        do throws(SQLiteError) {
            // The writer first: it switches the file to WAL and migrates before any reader opens.
            let walPages = self.walPages
            let executor = self.executor
            started.append(
                try SQLiteWorker(
                    name: "waybill.sqlite.writer", queue: writeQueue, batchLimit: Self.groupCommitLimit,
                    shared: executor.connection,
                    open: { () throws(SQLiteError) in
                        let db = try SQLiteConnection(path: path, busyTimeout: busyTimeout)
                        // Before WAL and the first table: only a new, empty file takes it.
                        try db.executeScript("PRAGMA page_size = \(Self.newDatabasePageSize)")
                        // Checkpoints run on `SQLiteCheckpointer`'s thread, not inside a commit.
                        try Self.switchToWAL(db)
                        try db.executeScript("PRAGMA wal_autocheckpoint = 0")
                        db.reportWALPages(to: walPages)
                        db.orderParts = OrderPartsCache()
                        db.trackOrderRowWrites()
                        try SQLiteMigrations.apply(to: db, at: clock())
                        return db
                    },
                    perform: { db, batch in executor.perform(batch, on: db) }))
            // The general readers, then one kept for urgent reads: the live path's reads (the hub
            // feed's, the relay's, the session watcher's) then never wait for a reader to come
            // free, however long the replays and list fetches that hold the others.
            let readers = max(1, readerCount)
            for index in 0...readers {
                let urgentOnly = index == readers
                started.append(
                    try SQLiteWorker(
                        name: urgentOnly ? "waybill.sqlite.reader.urgent" : "waybill.sqlite.reader.\(index)",
                        queue: readQueue, batchLimit: 1, urgentOnly: urgentOnly,
                        open: { () throws(SQLiteError) in
                            let db = try SQLiteConnection(path: path, busyTimeout: busyTimeout)
                            // Readers never write, even if a closure casts its reader to a writer.
                            try db.executeScript("PRAGMA query_only = ON")
                            return db
                        },
                        perform: { db, jobs in for job in jobs { job(db) } }))
            }
        } catch {
            writeQueue.close()
            readQueue.close()
            for worker in started { worker.waitUntilFinished() }
            throw StoreError.unavailable("cannot open \(path): \(error.description)")
        }
        workers = started
        do throws(SQLiteError) {
            checkpointer = try SQLiteCheckpointer(
                path: path, interval: checkpointInterval, policy: checkpointPolicy, walPages: walPages,
                checkpoint: { db throws(SQLiteError) in try gate.checkpointing { () throws(SQLiteError) in try checkpoint(db) } },
                finishOnWriter: { [writeQueue] in _ = writeQueue.enqueue(.finishCheckpoint) }, walSync: walSync)
        } catch {
            writeQueue.close()
            readQueue.close()
            for worker in started { worker.waitUntilFinished() }
            throw StoreError.unavailable("cannot open \(path): \(error.description)")
        }
    }

    deinit { close() }

    /// The writer's part of a checkpoint (`SQLiteCheckpointer`, "the tail"): PASSIVE, so it only
    /// copies what the checkpointer's run left and never waits for a reader. A failure is left to
    /// the checkpointer, whose next run meets the same cause and reports it (`health`).
    private static func finishCheckpoint(_ db: SQLiteConnection) {
        try? SQLiteCheckpointer.passive(db)
    }

    /// Runs `body` on a reader thread in a snapshot of committed data, then resumes the caller.
    ///
    /// The snapshot starts at the closure's first query and holds for the whole closure, so
    /// several queries agree with each other (an order and its events, say).
    /// - Throws: `StoreError`, or whatever `body` throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await read(urgent: false, body)
    }

    /// `read` ahead of the queued reads that are not urgent (`OrderStore.urgentRead`).
    public func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await read(urgent: true, body)
    }

    private func read<T: Sendable>(urgent: Bool, _ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        let clock = self.clock
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job: ReadJob = { db in continuation.resume(with: Self.performRead(body, on: db, clock: clock)) }
            if !readQueue.enqueue(job, urgent: urgent) { continuation.resume(throwing: StoreError.unavailable("the store is closed")) }
        }
    }

    /// Runs `body` on the writer thread inside a transaction it may share with other waiting
    /// writes (group commit), and resumes the caller once that transaction committed.
    ///
    /// If `body` throws, only its own changes are rolled back and the caller gets its error; the
    /// other closures of the batch still commit. If the `COMMIT` itself fails, every caller
    /// whose closure returned gets that failure and none of their changes exist, and a caller whose
    /// closure threw gets `.unavailable` (its refusal may have rested on work that was undone).
    ///
    /// Once queued, the closure runs and commits even if the calling task is cancelled: a write
    /// is never left half-known to its caller.
    /// - Throws: `StoreError`, or whatever `body` throws.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        // Task code the calling thread runs for the writer (`SQLiteWriterExecutor.runHere`, the
        // service thread's inline write) commits its write at once, without suspending: queued,
        // the write and the task's code after it would each be one more piece through the queue.
        if let value = try writeNow(body) { return value }
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = WriteJob(body, resume: { continuation.resume(with: $0) })
            if !writeQueue.enqueue(.write(job)) { continuation.resume(throwing: StoreError.unavailable("the store is closed")) }
        }
    }

    /// Committed at once when the calling thread runs the writer's work inline
    /// (`SQLiteWriterExecutor.runHere`) and the transaction can begin and commit without waiting
    /// (`InlineCommitGate`); otherwise `nil`, with nothing run.
    // Specialized for the order writes' result: their calls come through the protocol, where the
    // generic code looked up `DirectOutcome`'s and the job's types on every write.
    @_specialize(where T == (Order, [StoredEvent]))
    public func writeNow<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) throws -> T? {
        guard executor.runsInlineHere, !isClosed.withLock({ $0 }) else { return nil }
        let here = DirectOutcome<T>()
        guard executor.commitHere(WriteJob(body, resume: here.set)) else { return nil }
        // Every way through a transaction settles its write: never run the closure twice.
        guard let result = here.result else { throw StoreError.unavailable("a write ended without an outcome") }
        return try result.get()
    }

    /// The writer thread: tasks that prefer it run between its transactions (see `SQLiteWriterExecutor`).
    public var writerExecutor: (any WriterExecutor)? { executor }

    /// One writer thread commits in id order, so the observer hears every committed event of this
    /// process in order. Events other processes commit to the same file are not observed.
    public func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool {
        commitObserver.set(observer)
    }

    public func stopObservingCommits() { commitObserver.clear() }

    /// Lets queued reads and writes finish, then finalizes every statement and closes every
    /// connection. Later calls throw `StoreError.unavailable`. Idempotent.
    ///
    /// Blocks until the store's threads have stopped; never call it from inside a `read` or
    /// `write` closure.
    public func close() {
        let wasOpen = isClosed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        writeQueue.close()
        readQueue.close()
        // When the last reference to the store goes away inside one of its own jobs, `deinit`
        // runs on a store thread: waiting for that thread would deadlock, and it will finish
        // the queue and close its connection by itself once the job returns.
        // The same when it goes away inside a job the service thread runs for the writer
        // (`SQLiteWriterExecutor.runHere`): the writer thread needs the connection that thread holds.
        let holdsWriter = executor.connection.isHeldByCurrentThread
        for (index, worker) in workers.enumerated() where !worker.isCurrentThread && !(index == 0 && holdsWriter) {
            worker.waitUntilFinished()
        }
        // Its own thread and connection: stopped with the store, or it would keep the file open
        // and checkpoint a database nobody uses any more.
        checkpointer.close()
    }

    /// Whether the WAL checkpointer thread still runs (tests).
    var isCheckpointerRunning: Bool { checkpointer.isRunning }

    /// The checkpointer's intervals looked at and checkpoints attempted, and the WAL's size as the
    /// last commit reported it (tests).
    var checkpointerActivity: (ticks: Int, attempts: Int, tails: Int, walPages: Int?) {
        (checkpointer.ticks, checkpointer.attempts, checkpointer.tails, walPages.current)
    }

    /// The checkpointer's syncs of the WAL at ticks that saw commits, and those that failed (tests).
    var walSyncs: (done: Int, failed: Int) { (checkpointer.walSyncs, checkpointer.walSyncFailures) }

    /// Checkpoints that failed since the last one that worked: a WAL that cannot be copied back
    /// grows without bound.
    var consecutiveCheckpointFailures: Int { checkpointer.consecutiveFailures }

    /// Failed checkpoints in a row that make the store report `wal_checkpoint_failing` (one
    /// second of them at the 250 ms interval: a single failure may be a passing hiccup). A failure
    /// shows at the next due checkpoint (`CheckpointPolicy`: at most 2 s after a commit), so a
    /// checkpoint that starts failing is reported within about 3 s.
    static let checkpointFailureThreshold = 4

    /// `wal_checkpoint_failing` while checkpoints keep failing (the WAL grows: automatic
    /// checkpoints are off), `wal_sync_failing` while the checkpointer's syncs of the WAL keep
    /// failing (a power cut could take back more and more answered writes), or when the
    /// checkpointer thread stopped on an open store.
    public var health: StoreHealth {
        var problems: [String] = []
        if checkpointer.consecutiveFailures >= Self.checkpointFailureThreshold { problems.append("wal_checkpoint_failing") }
        if checkpointer.consecutiveWALSyncFailures >= Self.checkpointFailureThreshold { problems.append("wal_sync_failing") }
        if !checkpointer.isRunning && !isClosed.withLock({ $0 }) { problems.append("wal_checkpointer_stopped") }
        return StoreHealth(problems: problems, checkpointFailures: checkpointer.totalFailures, walPages: walPages.current)
    }

    /// One process per SQLite store: a local lock serves as the cluster-wide lease.
    public func lease(_ name: String) -> any Lease { LocalLease(name: name, registry: leases) }

    /// Reads of an order's stages and documents the writer's `OrderPartsCache` answered, its
    /// entries, and reads of whole orders it answered (tests); waits for the writer connection.
    var orderPartsCache: (hits: Int, entries: Int, rowHits: Int)? {
        executor.connection.ifFree(orWait: true) { db in db.orderParts.map { ($0.hits, $0.count, $0.rowHits) } } ?? nil
    }

    /// Makes the writer connection's next flush of gathered WAL bytes fail as a full disk's write
    /// would (`SQLITE_FULL`, `WALGatherBuffer.flushFault`; tests). False without a gathered WAL.
    func failNextWALFlush() -> Bool {
        executor.connection.ifFree(orWait: true) { db -> Bool in
            guard let buffer = db.walBuffer else { return false }
            buffer.flushFault = SQLITE_FULL
            return true
        } ?? false
    }

    /// Write closures and task pieces waiting for the writer thread (tests use it to build a batch).
    var pendingWriteCount: Int { writeQueue.count }

    private static func performRead<T>(
        _ body: (any StoreReader) throws -> T, on db: SQLiteConnection, clock: @escaping @Sendable () -> Date
    ) -> Result<T, any Error> {
        // A read only looks: running it again after a transient WAL-lock failure is safe.
        var attempt = 0
        while true {
            let result = performReadOnce(body, on: db, clock: clock)
            guard case .failure(let error) = result, SQLiteTransient.isTransient(error),
                attempt < SQLiteTransient.attempts
            else { return result }
            attempt += 1
            SQLiteTransient.pause(attempt)
        }
    }

    private static func performReadOnce<T>(
        _ body: (any StoreReader) throws -> T, on db: SQLiteConnection, clock: @escaping @Sendable () -> Date
    ) -> Result<T, any Error> {
        do throws(SQLiteError) {
            try db.execute("BEGIN")
        } catch {
            return .failure(error.storeError)
        }
        let tx = Transaction(db: db, clock: clock)
        let result = Result { try body(tx) }.mapError { $0.translatedForStore }
        tx.end()
        // Nothing to keep: ending the transaction only releases the snapshot.
        do { try db.execute("COMMIT") } catch { if db.isInTransaction { try? db.execute("ROLLBACK") } }
        return result
    }
}

/// A `read` closure bound to its caller's continuation, run on a reader thread.
typealias ReadJob = @Sendable (SQLiteConnection) -> Void

extension SQLiteOrderStore {
    /// Switches the file to WAL and checks that it took: SQLite answers with the mode now in force
    /// and keeps the old one where WAL cannot work (a file system without shared memory or locks,
    /// an in-memory database). Run there silently, the store was slower, readers and the writer
    /// blocked each other, and the inline write path stayed shut (a review, 2026-12-05).
    static func switchToWAL(_ db: SQLiteConnection) throws(SQLiteError) {
        let mode = try db.queryFirst("PRAGMA journal_mode = WAL") { row in row.text(0) }
        guard mode?.lowercased() == "wal" else {
            throw SQLiteError(
                code: SQLITE_ERROR,
                message: "the database cannot use write-ahead logging (journal mode \(mode ?? "unknown")): "
                    + "put the data directory on a local file system")
        }
    }
}
