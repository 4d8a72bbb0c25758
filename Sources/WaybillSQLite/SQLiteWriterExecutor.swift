import Dispatch
import Foundation
import Synchronization
import WaybillStorage

/// What the writer thread takes from its queue: a write closure, a piece of a task that runs on
/// the writer (`SQLiteWriterExecutor`), or the checkpointer's request to finish its checkpoint.
enum WriterWork: Sendable {
    case write(WriteJob)
    case task(UnownedJob)
    /// Copy back the WAL frames committed while the checkpointer's own checkpoint ran, so the next
    /// commit starts the WAL over (`SQLiteCheckpointer`, "the tail").
    case finishCheckpoint
}

/// The writer thread as a `TaskExecutor` (`OrderStore.writerExecutor`).
///
/// Why: a write request used to cross five threads — the service thread hands it to the global
/// pool, the pool queues the write for the writer, the writer resumes the caller on the pool, the
/// pool hands the answer back to the service thread — and each crossing woke a sleeping thread:
/// measured at 1 000 writes/s, about 7 context switches and over half a millisecond of CPU per
/// write, mostly the kernel's wake-up path. A task that prefers this executor runs on the writer
/// between transactions: its write is queued, committed and its continuation resumed on the same
/// thread, which never sleeps in between (docs/BENCHMARKS.md has the numbers).
///
/// Jobs go into the writer's own queue, so task code and transactions take turns in arrival order:
/// task code must never block (it would hold every write back), which is why the server sends only
/// write requests here.
final class SQLiteWriterExecutor: WriterExecutor {
    private let queue: JobQueue<WriterWork>
    private let observer = ObserverSlot<WriterBatchPoint>()
    /// The writer's connection, for batches run by the thread that queued them (`runHere`).
    let connection = SharedConnection()
    private let groupCommit: SQLiteGroupCommit
    /// The most jobs `runHere` takes at once (the writer thread's own batch limit).
    private let batchLimit: Int
    /// The writer's part of a checkpoint (`WriterWork.finishCheckpoint`).
    private let finishCheckpoint: @Sendable (SQLiteConnection) -> Void

    init(
        queue: JobQueue<WriterWork>, groupCommit: SQLiteGroupCommit, batchLimit: Int,
        finishCheckpoint: @escaping @Sendable (SQLiteConnection) -> Void
    ) {
        self.queue = queue
        self.groupCommit = groupCommit
        self.batchLimit = batchLimit
        self.finishCheckpoint = finishCheckpoint
    }

    /// Batches one call of `runHere` runs at most before it leaves the rest to the writer thread,
    /// after the task's start at once (which takes none): a write request that started so takes
    /// none, one started the usual way takes one when its commit runs at once (`commitHere`), and
    /// three when it was queued (its code up to `write`, the commit, its code after); other
    /// threads' writes queued meanwhile must not keep the calling thread from its own work.
    static let inlineBatches = 6

    /// Runs `start` (which starts a task on this executor) and then, if the writer thread is idle
    /// and nothing else is queued, the work it queued right here, on the calling thread, instead
    /// of waking the writer thread: the task's code, its commit and the rest of its code. Measured
    /// at 1 000 writes/s, each hand-off between the service thread and the writer woke a sleeping
    /// thread, and the wake-ups were the largest share of a write's CPU (docs/BENCHMARKS.md). What
    /// cannot run without waiting goes to the writer thread as before: a commit that would wait for
    /// another process's lock or sync the WAL (`InlineCommitGate`), a checkpoint tail, and
    /// everything while the writer is busy.
    func runHere(_ start: (_ here: Bool) -> Void) {
        // Work queued before this (a prune, writes from the pool) is the writer thread's, and
        // goes first: with it waiting, the task is queued behind it, even if the writer has not
        // taken the connection yet (found by a review, 2026-12-06).
        guard queue.beginQuietEnqueues() else {
            start(false)
            queue.endQuietEnqueues()
            return
        }
        let ran: Void? = connection.ifFree { db in
            inlineThread.store(UInt(pthread_self()), ordering: .relaxed)
            defer { inlineThread.store(0, ordering: .relaxed) }
            // The task starts at once on this thread (its first piece never goes through the queue),
            // or is queued and taken below (a caller that starts it the usual way).
            start(true)
            for _ in 0..<Self.inlineBatches {
                guard let batch = queue.takeOwn(upTo: batchLimit) else { return }
                let handedBack = perform(batch, on: db, inline: true)
                guard handedBack.isEmpty else {
                    // Before anything queued after them; wakes the writer. A store closed meanwhile
                    // may have no writer left to run them: they fail as any write on it does.
                    if !queue.putBack(handedBack) {
                        for case .write(let write) in handedBack { write.fail(StoreError.unavailable("the store is closed")) }
                    }
                    return
                }
            }
        }
        if ran == nil { start(false) }  // the writer is busy: the task goes to its queue
        queue.endQuietEnqueues()  // wakes the writer thread for whatever is left
    }

    /// The thread running this executor's work inline now (`runHere`, inside `connection.ifFree`), or 0.
    private let inlineThread = Atomic<UInt>(0)

    /// Commits `job` at once on the calling thread when task code that thread runs inline
    /// (`runHere`) asked for it, and says whether it did (its outcome is then settled). Otherwise —
    /// another thread, or a transaction that cannot begin without waiting (`InlineCommitGate`) —
    /// nothing ran, and the caller queues the job as usual.
    ///
    /// Why: queued, a write split its task into three pieces through the queue (its code up to
    /// `write`, the commit, its code after), each taken under the queue's lock, with a suspension
    /// and a continuation between them. The thread holds the connection, so no other commit can
    /// come between this one and the piece's code. A write another thread queued while the piece
    /// ran is overtaken by this one; the two were concurrent, and no order between them was ever
    /// promised. The piece may commit more than once (`inlineBatches` bounds the pieces, not
    /// their commits): an order write's handler commits once, twice with an `Idempotency-Key`.
    func commitHere(_ job: WriteJob) -> Bool {
        guard runsInlineHere, let db = connection.heldByCurrentThread else { return false }
        return groupCommit.perform([job], on: db, inline: true).isEmpty
    }

    /// Whether the calling thread runs this executor's work inline now (`runHere`).
    var runsInlineHere: Bool { inlineThread.load(ordering: .relaxed) == UInt(pthread_self()) }

    func observeBatches(_ body: @escaping @Sendable (WriterBatchPoint) -> Void) -> Bool { observer.set(body) }

    func stopObservingBatches() { observer.clear() }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        guard !queue.enqueue(.task(job)) else { return }
        // The store is closed (its writer thread is gone or going): a task must still run to its
        // end, where its `write` calls fail with "the store is closed". Dispatch's pool runs it.
        // `self` is captured strongly: the job must not outlive the executor it names.
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }

    /// Runs a batch on the writer thread: task pieces first, in order (they may queue more
    /// writes, which the next batch takes), then the batch's writes in one group commit. The
    /// observer hears each point; `.committing` comes before the transaction begins, so what the
    /// pieces posted (answers of writes committed earlier) never waits behind a commit that waits
    /// for another process's lock. A checkpoint tail runs last, after `.ended`, so the answers of
    /// the batch are not held behind its `fsync`s.
    ///
    /// `inline`: not on the writer thread. Then a checkpoint tail and writes whose transaction could
    /// not begin without waiting are returned unrun (in order), for the writer thread.
    @discardableResult
    func perform(_ batch: [WriterWork], on db: SQLiteConnection, inline: Bool = false) -> [WriterWork] {
        let observer = self.observer.current
        observer?.call(.started)
        var writes: [WriteJob] = []
        var tailRequested = false
        let executor = asUnownedTaskExecutor()
        for item in batch {
            switch item {
            case .task(let job): job.runSynchronously(on: executor)
            case .write(let write): writes.append(write)
            case .finishCheckpoint: tailRequested = true
            }
        }
        var handedBack: [WriterWork] = []
        if !writes.isEmpty {
            observer?.call(.committing)
            handedBack = groupCommit.perform(writes, on: db, inline: inline).map { .write($0) }
        }
        if inline && tailRequested {
            handedBack.append(.finishCheckpoint)
            tailRequested = false
        }
        // Before a tail the writer is about to be busy with `fsync`s: the batch's answers go out now,
        // as if it were idle, instead of waiting for the next batch's points behind those syncs.
        observer?.call(.ended(idle: tailRequested || !handedBack.isEmpty || queue.count == 0))
        if tailRequested { finishCheckpoint(db) }
        return handedBack
    }
}
