internal import CSQLite
import Synchronization

/// When a transaction may run off the writer thread (`SQLiteWriterExecutor.runHere`): only when
/// beginning it cannot wait and committing it cannot `fsync`.
///
/// Why a gate: the thread that runs a write "inline" is the server's service thread, which every
/// socket shares; the writer thread exists so that nothing there waits for the disk or for another
/// process. Two waits hide in an ordinary commit, and both are avoided here:
///
/// - **Another process's write lock** (`waybill seed` beside a running server): the inline
///   `BEGIN IMMEDIATE` runs with no busy timeout; if the lock is taken, the writes go back to
///   the writer thread, which waits for it as before.
/// - **The WAL starting over.** With `synchronous = NORMAL` a commit syncs nothing, except the
///   first one after a checkpoint copied the whole WAL back: that commit writes the WAL's header
///   anew and syncs it. Such a commit can only follow a checkpoint, so every checkpoint (the
///   checkpointer's and the writer's tail) moves an epoch, odd while it runs; a transaction may
///   begin inline only if the writer thread has committed since the last checkpoint ended (its
///   commit is the one that started the WAL over, if any did) and the epoch did not move while it
///   began. Only a commit that wrote WAL frames counts (SQLite's WAL hook saw it: `WALPages`): one
///   that changed nothing — a prune that found nothing, an unknown ticket's `DELETE` — leaves the
///   WAL as the checkpoint left it, for the next commit to start over. A WAL left by another
///   process's checkpoint is not seen; then one inline commit may sync its header (docs/DESIGN.md,
///   "Writes on the service thread").
final class InlineCommitGate: Sendable {
    private let epoch = Atomic<Int>(0)
    /// The epoch at the last writer-thread `BEGIN` whose transaction committed (even values only).
    private let cleared = Atomic<Int>(-1)
    /// The writer connection's busy timeout, restored after an inline `BEGIN`.
    let busyTimeoutMilliseconds: Int32
    /// Counts the writer connection's commits that wrote WAL frames.
    private let walPages: WALPages

    init(busyTimeoutMilliseconds: Int32, walPages: WALPages) {
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.walPages = walPages
    }

    /// What the writer thread notes just before its `BEGIN IMMEDIATE`.
    struct WriterBegin {
        fileprivate let epoch: Int
        fileprivate let walCommits: Int
    }

    /// Runs a checkpoint: the epoch is odd while it runs, and moves again when it ends.
    func checkpointing<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        epoch.add(1, ordering: .sequentiallyConsistent)
        defer { epoch.add(1, ordering: .sequentiallyConsistent) }
        return try body()
    }

    /// The writer thread is about to begin a transaction.
    func writerBegins() -> WriterBegin {
        WriterBegin(epoch: epoch.load(ordering: .sequentiallyConsistent), walCommits: walPages.commits)
    }

    /// The writer thread committed the transaction it began at `begin`. It opens the gate if it
    /// wrote WAL frames (so it started the WAL over, if the last checkpoint left that to do) and no
    /// checkpoint ran while it began.
    func writerCommitted(_ begin: WriterBegin) {
        guard begin.epoch & 1 == 0, walPages.commits != begin.walCommits else { return }
        cleared.store(begin.epoch, ordering: .sequentiallyConsistent)
    }

    /// Begins a write transaction on a thread that must not wait, or says it may not (`false`:
    /// nothing was begun; the caller hands its writes to the writer thread).
    func beginInline(on db: SQLiteConnection) -> Bool {
        let before = epoch.load(ordering: .sequentiallyConsistent)
        guard before & 1 == 0, before == cleared.load(ordering: .sequentiallyConsistent) else { return false }
        db.setBusyTimeout(milliseconds: 0)
        defer { db.setBusyTimeout(milliseconds: busyTimeoutMilliseconds) }
        do throws(SQLiteError) {
            try db.execute("BEGIN IMMEDIATE")
        } catch {
            return false  // busy, or anything else: the writer thread meets it and reports it
        }
        // A checkpoint that ended between the check and the BEGIN may have left the WAL for this
        // transaction to start over.
        guard epoch.load(ordering: .sequentiallyConsistent) == before else {
            try? db.execute("ROLLBACK")
            return false
        }
        return true
    }
}
