import Foundation

/// A FIFO of jobs shared by the callers of a store and the worker threads that own its
/// connections (`SQLiteWorker`, `PostgresWorker`): blocking C calls run there, never on Swift's
/// cooperative pool. For the store modules only (`package`).
///
/// `@unchecked Sendable`: `jobs` and `isClosed` are only read or written while holding
/// `condition`, which is also what idle worker threads wait on.
package final class JobQueue<Job: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var isClosed = false

    package init() {}

    /// Adds a job; `false` when the queue is closed (the job will never run).
    package func enqueue(_ job: Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        jobs.append(job)
        // Signalled under the lock. Tried: after the unlock (a woken worker no longer blocks on the
        // lock it is woken under, 0.8 % of the samples at 1 000 writes/s); in one CI run of four a
        // store call then never ran until the store closed (a lost wake-up, glibc's condition
        // variable or ours), and the gain was not worth that doubt.
        condition.signal()
        return true
    }

    /// Waits for at least one job and takes up to `limit` of them, oldest first.
    /// Returns `nil` once the queue is closed and drained: the worker should stop.
    package func take(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !isClosed { condition.wait() }
        guard !jobs.isEmpty else { return nil }
        let batch: [Job]
        if jobs.count <= limit {
            // The usual case: everything queued goes, and the queue keeps no copy.
            batch = jobs
            jobs = []
        } else {
            batch = Array(jobs.prefix(limit))
            jobs.removeFirst(batch.count)
        }
        // Another worker sharing this queue may take what is left.
        if !jobs.isEmpty { condition.signal() }
        return batch
    }

    /// Refuses new jobs; workers finish the queued ones, then stop.
    package func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Jobs waiting to be taken.
    package var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count
    }
}
