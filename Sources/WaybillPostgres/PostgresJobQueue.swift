import Foundation

/// A FIFO of jobs shared by the caller side and the `PostgresWorker` threads serving it.
///
/// `@unchecked Sendable`: `jobs` and `isClosed` are only read or written while holding
/// `condition`, which is also what idle worker threads wait on.
final class PostgresJobQueue: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [PostgresJob] = []
    private var isClosed = false

    /// Adds a job; `false` when the queue is closed (the job will never run).
    func enqueue(_ job: PostgresJob) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        jobs.append(job)
        condition.signal()
        return true
    }

    /// Waits for a job and takes the oldest; `nil` once the queue is closed and drained.
    func take() -> PostgresJob? {
        condition.lock()
        defer { condition.unlock() }
        while jobs.isEmpty && !isClosed { condition.wait() }
        guard !jobs.isEmpty else { return nil }
        return jobs.removeFirst()
    }

    /// Refuses new jobs; workers finish the queued ones, then stop.
    func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
    }
}

/// A `read` or `write` closure bound to its caller's continuation, run on a worker thread.
struct PostgresJob: Sendable {
    let run: @Sendable (PostgresSession) -> Void
}
