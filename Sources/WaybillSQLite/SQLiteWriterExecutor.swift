import WaybillStorage

/// What the writer thread takes from its queue: a write closure, or a step of a task that prefers
/// the writer as its executor.
enum WriterItem: Sendable {
    case write(WriteJob)
    case task(UnownedJob)
}

/// Runs tasks on the SQLite writer thread, between its transactions (`OrderStore.writeExecutor`).
///
/// Why: a write request's task used to hop pool → writer → pool for its one `write` (two
/// futex wake-ups and two cold caches per write, docs/BENCHMARKS.md). A task that prefers this
/// executor queues its `WriteJob` from the writer thread itself, and its continuation comes back
/// to the same queue: the whole request runs on one thread. Write closures of several such tasks
/// that queue up still share one transaction (group commit).
final class SQLiteWriterExecutor: TaskExecutor {
    private let queue: JobQueue<WriterItem>

    init(queue: JobQueue<WriterItem>) { self.queue = queue }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // A closed store's thread is gone: the task continues on the global executor (its next
        // store call throws `unavailable`), never stranded.
        if !queue.enqueue(.task(job)) { globalConcurrentExecutor.enqueue(job) }
    }

    /// Writer thread: runs the queue's items in order, consecutive writes as one batch.
    func perform(_ items: [WriterItem], on db: SQLiteConnection, groupCommit: SQLiteGroupCommit) {
        var writes: [WriteJob] = []
        for item in items {
            switch item {
            case .write(let job):
                writes.append(job)
            case .task(let job):
                if !writes.isEmpty {
                    groupCommit.perform(writes, on: db)
                    writes.removeAll(keepingCapacity: true)
                }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        if !writes.isEmpty { groupCommit.perform(writes, on: db) }
    }
}
