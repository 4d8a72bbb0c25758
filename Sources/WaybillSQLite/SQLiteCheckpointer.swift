import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Copies the WAL back into the database file on its own thread and connection.
///
/// Why: SQLite's automatic checkpoint runs inside whichever commit crosses the threshold, on the
/// writer thread, and its `fsync` stalls every write queued behind it (the p99 of a write and of
/// its event delivery). The writer turns automatic checkpoints off and reports the WAL's size
/// after each commit (`WALPages`); this thread looks every `interval` and runs a PASSIVE
/// checkpoint, which never blocks the writer or the readers, when `CheckpointPolicy` says it is due.
///
/// The tail: the WAL starts over only when a commit finds every frame in it copied back. Under
/// steady writes that never happened: commits land while the checkpoint copies and syncs, so each
/// checkpoint ended a few frames short, and the WAL grew by every commit's pages for as long as the
/// writes went on (measured at 1 000 writes/s: 21 MB a second, with ext4 allocating and zeroing the
/// new blocks in every commit, about a tenth of the server's CPU). So when commits came in during a
/// checkpoint, the thread asks the writer (`finishOnWriter`) to copy back what is left itself,
/// between two transactions: nothing can commit meanwhile, and the next commit starts the WAL over,
/// reusing the file's blocks. The cost: that copy and its two `fsync`s (WAL, then database) run on
/// the writer, once per checkpoint while writes are steady, and the writes queued behind it wait
/// (the copy is what was committed since this thread's checkpoint began: usually a few commits).
///
/// The WAL's sync: with `synchronous=NORMAL` SQLite syncs the WAL only when a checkpoint starts,
/// so a power cut or a kernel crash could take back every commit since the last checkpoint — up
/// to about 2 s of answered writes (the policy's age limit plus a tick), longer while checkpoints
/// fail (found by a review, 2026-12-07). At every tick that saw commits, this thread syncs the WAL
/// file itself (`fdatasync`), off every request's path: what a power cut can take back is then
/// about one interval (250 ms) plus the tick's own work (a checkpoint, the sync), unbounded only
/// while the syncs fail, which the store's health reports (`wal_sync_failing`). A process that
/// dies loses nothing either way.
final class SQLiteCheckpointer: Sendable {
    private let stop = DispatchSemaphore(value: 0)
    private let finished = DispatchSemaphore(value: 0)
    private let isStopped = Mutex(false)
    /// What the thread reports, shared with it (atomics cannot be captured on their own).
    private final class Status: Sendable {
        let running = Atomic<Bool>(false)
        let failures = Atomic<Int>(0)
        let totalFailures = Atomic<Int>(0)
        let ticks = Atomic<Int>(0)
        let attempts = Atomic<Int>(0)
        let tails = Atomic<Int>(0)
        let walSyncs = Atomic<Int>(0)
        let walSyncFailures = Atomic<Int>(0)
        let consecutiveWALSyncFailures = Atomic<Int>(0)
    }
    private let status = Status()

    /// Whether the thread is still running.
    var isRunning: Bool { status.running.load(ordering: .acquiring) }
    /// Checkpoints that failed in a row (0 after one that worked).
    var consecutiveFailures: Int { status.failures.load(ordering: .relaxed) }
    /// Checkpoints that failed since the thread started.
    var totalFailures: Int { status.totalFailures.load(ordering: .relaxed) }
    /// Intervals looked at, and checkpoints attempted (tests).
    var ticks: Int { status.ticks.load(ordering: .relaxed) }
    var attempts: Int { status.attempts.load(ordering: .relaxed) }
    /// Checkpoints after which the writer was asked to copy back the tail (tests).
    var tails: Int { status.tails.load(ordering: .relaxed) }
    /// The WAL's syncs at ticks that saw commits, those that failed (tests), and the failures since
    /// the last one that worked (health).
    var walSyncs: Int { status.walSyncs.load(ordering: .relaxed) }
    var walSyncFailures: Int { status.walSyncFailures.load(ordering: .relaxed) }
    var consecutiveWALSyncFailures: Int { status.consecutiveWALSyncFailures.load(ordering: .relaxed) }

    /// The WAL's sync, given the WAL file's name; `false` if it could not. Tests replace it (an
    /// internal seam: a failing `fdatasync` cannot be set up in a test).
    typealias WALSync = @Sendable (String) -> Bool

    /// Syncs the WAL file's data to the disk; `false` if it could not. The file exists whenever
    /// there were commits (this thread's own connection keeps it), so a failed open is a failure
    /// too: a wrong name must not pass for a sync.
    static func syncWAL(at walPath: String) -> Bool {
        let descriptor = open(walPath, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { _ = Glibc.close(descriptor) }
        return fdatasync(descriptor) == 0
    }

    /// One checkpoint on the checkpointer's connection. Tests replace it (an internal seam) to
    /// make checkpoints fail: a PASSIVE checkpoint does not fail on a busy database, and the
    /// conditions that do fail it (I/O errors, a full disk) cannot be set up in a test.
    typealias Checkpoint = @Sendable (SQLiteConnection) throws(SQLiteError) -> Void
    static let passive: Checkpoint = { connection throws(SQLiteError) in
        try connection.executeScript("PRAGMA wal_checkpoint(PASSIVE)")
    }

    /// Starts the thread; it opens its own connection there (connections never cross threads).
    init(
        path: String, interval: Duration = .milliseconds(250), policy: CheckpointPolicy = CheckpointPolicy(),
        walPages: WALPages = WALPages(), checkpoint: @escaping Checkpoint = SQLiteCheckpointer.passive,
        finishOnWriter: @escaping @Sendable () -> Void = {}, walSync: @escaping WALSync = SQLiteCheckpointer.syncWAL(at:)
    ) throws(SQLiteError) {
        let stop = self.stop, finished = self.finished, status = self.status
        let opened = DispatchSemaphore(value: 0)
        let failure = Mutex<SQLiteError?>(nil)
        let seconds = Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18
        let thread = Thread {
            let connection: SQLiteConnection
            do throws(SQLiteError) {
                connection = try SQLiteConnection(path: path)
            } catch {
                failure.withLock { $0 = error }
                opened.signal()
                finished.signal()
                return
            }
            // As SQLite names it (a symlinked or relative path would give another name).
            let walPath = connection.walFileName ?? path + "-wal"
            status.running.store(true, ordering: .releasing)
            opened.signal()
            let clock = ContinuousClock()
            var lastCheckpoint: ContinuousClock.Instant?
            var commitsAtLastCheckpoint = -1
            var commitsAtLastSync = 0
            var lastFailed = false
            while stop.wait(timeout: .now() + seconds) == .timedOut {
                let commits = walPages.commits
                if commits != commitsAtLastSync {
                    // Every commit counted here wrote its frames before it was counted.
                    if walSync(walPath) {
                        commitsAtLastSync = commits
                        status.walSyncs.add(1, ordering: .relaxed)
                        status.consecutiveWALSyncFailures.store(0, ordering: .relaxed)
                    } else {  // tried again at the next tick
                        status.walSyncFailures.add(1, ordering: .relaxed)
                        status.consecutiveWALSyncFailures.add(1, ordering: .relaxed)
                    }
                }
                let tick = CheckpointPolicy.Tick(
                    walPages: walPages.current, sinceLastCheckpoint: lastCheckpoint.map { $0.duration(to: clock.now) },
                    lastAttemptFailed: lastFailed, committedSinceLastCheckpoint: commits != commitsAtLastCheckpoint)
                defer { status.ticks.add(1, ordering: .relaxed) }
                guard policy.isDue(tick) else { continue }
                status.attempts.add(1, ordering: .relaxed)
                // Not swallowed: with automatic checkpoints off, a failure here means the WAL grows.
                do throws(SQLiteError) {
                    // Read just before: a commit between the tick and the checkpoint is copied by it.
                    let commitsBefore = walPages.commits
                    try checkpoint(connection)
                    if walPages.commits != commitsBefore {
                        finishOnWriter()
                        status.tails.add(1, ordering: .relaxed)  // after: tests queue behind the request
                    }
                    status.failures.store(0, ordering: .relaxed)
                    lastFailed = false
                    lastCheckpoint = clock.now
                    commitsAtLastCheckpoint = commitsBefore
                } catch {
                    status.failures.add(1, ordering: .relaxed)
                    status.totalFailures.add(1, ordering: .relaxed)
                    lastFailed = true
                }
            }
            connection.close()
            status.running.store(false, ordering: .releasing)
            finished.signal()
        }
        thread.name = "waybill.sqlite.checkpointer"
        thread.start()
        opened.wait()
        if let error = failure.withLock({ $0 }) {
            isStopped.withLock { $0 = true }
            throw error
        }
    }

    /// Stops the thread and closes its connection; returns when both are done. Idempotent.
    func close() {
        let first = isStopped.withLock { stopped in
            defer { stopped = true }
            return !stopped
        }
        guard first else { return }
        stop.signal()
        finished.wait()
    }
}
