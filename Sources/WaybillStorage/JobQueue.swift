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
    /// How many jobs at the front of `jobs` were queued `urgent` (in their own arrival order).
    private var urgentCount = 0
    private var isClosed = false
    /// A thread that will run what it queues itself (`beginQuietEnqueues`): its enqueues wake nobody.
    private var quietThread: pthread_t?
    /// Jobs queued by any other thread, ever: `takeOwn` takes nothing once one came in.
    private var otherEnqueues = 0
    /// `otherEnqueues` when the quiet scope began on an empty queue; nil otherwise.
    private var quietMark: Int?

    package init() {}

    /// Adds a job; `false` when the queue is closed (the job will never run). An `urgent` job goes
    /// after the urgent ones already queued and ahead of every other.
    package func enqueue(_ job: Job, urgent: Bool = false) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        if urgent {
            jobs.insert(job, at: urgentCount)
            urgentCount += 1
        } else {
            jobs.append(job)
        }
        if let quietThread, pthread_equal(quietThread, pthread_self()) != 0 { return true }
        otherEnqueues &+= 1
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
        guard waitLocked() else { return nil }
        return takeLocked(upTo: limit)
    }

    /// Waits for a job or the close; `false` when closed and drained. Inside the lock.
    private func waitLocked() -> Bool {
        while jobs.isEmpty && !isClosed { condition.wait() }
        return !jobs.isEmpty
    }

    private func takeLocked(upTo limit: Int) -> [Job] {
        let batch: [Job]
        if jobs.count <= limit {
            // The usual case: everything queued goes, and the queue keeps no copy.
            batch = jobs
            jobs = []
        } else {
            batch = Array(jobs.prefix(limit))
            jobs.removeFirst(batch.count)
        }
        urgentCount = max(0, urgentCount - batch.count)
        // Another worker sharing this queue may take what is left.
        if !jobs.isEmpty { condition.signal() }
        return batch
    }

    // MARK: Shared with a thread that runs jobs itself (the SQLite writer's inline path)

    /// Until `endQuietEnqueues`, jobs the calling thread queues wake no worker: it runs them itself
    /// (`takeOwn`), or leaves them for a worker and wakes it then. One such thread at a time.
    package func beginQuietEnqueues() {
        condition.lock()
        quietThread = pthread_self()
        quietMark = jobs.isEmpty ? otherEnqueues : nil
        condition.unlock()
    }

    /// Ends the quiet scope; wakes a worker if jobs are left (the quiet thread did not run them all).
    package func endQuietEnqueues() {
        condition.lock()
        defer { condition.unlock() }
        quietThread = nil
        quietMark = nil
        if !jobs.isEmpty { condition.signal() }
    }

    /// Takes up to `limit` jobs, oldest first, without waiting; `nil` when none is queued.
    package func takeNow(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        return jobs.isEmpty ? nil : takeLocked(upTo: limit)
    }

    /// For the quiet thread: takes up to `limit` jobs if all that is queued is its own (the queue
    /// was empty when its scope began and no other thread has queued since); `nil` otherwise —
    /// other threads' work (a prune, a batch of writes) is the worker's, however it is interleaved.
    package func takeOwn(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        guard let quietMark, quietMark == otherEnqueues, !jobs.isEmpty else { return nil }
        return takeLocked(upTo: limit)
    }

    /// Waits until a job is queued (`true`) or the queue is closed and drained (`false`), and
    /// takes nothing: a worker that must first win its connection (`takeNow` under that lock).
    package func waitForJobs() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        return waitLocked()
    }

    /// Puts jobs taken but not run back at the front, in their order, and wakes a worker for them.
    /// `false` (nothing queued) once the queue is closed: its workers may be gone already.
    package func putBack(_ taken: [Job]) -> Bool {
        guard !taken.isEmpty else { return true }
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        jobs.insert(contentsOf: taken, at: 0)
        urgentCount += taken.count  // back at the front: an urgent job queued later goes behind them
        condition.signal()
        return true
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
