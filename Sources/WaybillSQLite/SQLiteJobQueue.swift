import Foundation

/// A FIFO of jobs shared by the caller side and one or more `SQLiteWorker` threads.
///
/// `@unchecked Sendable`: `jobs` and `isClosed` are only read or written while holding
/// `condition`, which is also what idle worker threads wait on.
final class SQLiteJobQueue<Job: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [Job] = []
    private var isClosed = false

    /// Adds a job; `false` when the queue is closed (the job will never run).
    func enqueue(_ job: Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Waits for at least one job and takes up to `limit` of them, oldest first.
    /// Returns `nil` once the queue is closed and drained: the worker should stop.
    func take(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !isClosed { condition.wait() }
        guard !jobs.isEmpty else { return nil }
        let batch = Array(jobs.prefix(limit))
        jobs.removeFirst(batch.count)
        // Another worker sharing this queue may take what is left.
        if !jobs.isEmpty { condition.signal() }
        return batch
    }

    /// Refuses new jobs; workers finish the queued ones, then stop.
    func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
    }

    /// Jobs waiting to be taken.
    var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count
    }
}
