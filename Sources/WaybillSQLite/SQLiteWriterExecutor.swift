import Dispatch
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

    init(queue: JobQueue<WriterWork>) {
        self.queue = queue
    }

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
    func perform(
        _ batch: [WriterWork], groupCommit: SQLiteGroupCommit, on db: SQLiteConnection,
        finishCheckpoint: (SQLiteConnection) -> Void
    ) {
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
        if !writes.isEmpty {
            observer?.call(.committing)
            groupCommit.perform(writes, on: db)
        }
        // Before a tail the writer is about to be busy with `fsync`s: the batch's answers go out now,
        // as if it were idle, instead of waiting for the next batch's points behind those syncs.
        observer?.call(.ended(idle: tailRequested || queue.count == 0))
        if tailRequested { finishCheckpoint(db) }
    }
}
