import Foundation

/// A FIFO of jobs shared by the callers of a store and the worker threads that own its
/// connections (`SQLiteWorker`, `PostgresWorker`): blocking C calls run there, never on Swift's
/// cooperative pool. For the store modules only (`package`).
///
/// Jobs are taken urgent ones first (`urgent`, in their arrival order), then the others (`jobs`).
/// Each is a `JobFIFO`: taking from the front costs the same however many wait behind (under a
/// backlog, a reconnect storm's replays, an array's `removeFirst` moved every waiting job at each
/// take, and an urgent insert at its place in one array moved every other one).
///
/// `@unchecked Sendable`: `jobs`, `urgent` and `isClosed` are only read or written while holding
/// `condition`, which is also what idle worker threads wait on.
package final class JobQueue<Job: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs = JobFIFO<Job>()
    /// Jobs queued `urgent`, and those put back (`putBack`): taken before every job of `jobs`.
    private var urgent = JobFIFO<Job>()
    private var urgentCount: Int { urgent.count }
    /// Jobs in `jobs` and `urgent` together, kept by every append and take. Why: asking the two
    /// FIFOs went through this generic class's unspecialized code (type metadata looked up per
    /// call) three times per inline write, about 1 µs (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    private var queued = 0
    private var isClosed = false
    /// A thread that will run what it queues itself (`beginQuietEnqueues`): its enqueues wake nobody.
    private var quietThread: pthread_t?
    /// Jobs queued by any other thread, ever: `takeOwn` takes nothing once one came in.
    private var otherEnqueues = 0
    /// `otherEnqueues` when the quiet scope began on an empty queue; nil otherwise.
    private var quietMark: Int?
    /// Workers asleep in `take(upTo:)` or `waitForJobs` (under `condition`).
    private var idleWorkers = 0
    /// The reserved workers' own wake-up (`take(upTo:urgentOnly: true)`), apart from `condition`
    /// so that a signal meant for any worker never lands on one that would leave the job queued.
    /// Taken inside `condition`'s lock, never the other way round.
    private let reserve = NSCondition()
    /// Set (under `reserve`) when an urgent job may wait for a reserved worker.
    private var reserveCalled = false
    /// Kept workers asleep on `reserve` (tests wait for them).
    private var keptWorkersAsleep = 0
    /// Set (under `reserve`) by `close`: every reserved worker wakes and stops.
    private var reserveClosed = false
    /// Set (under `reserve`) by `wakeKeptWorkers`: a kept worker returns from its wait with no job.
    private var reservePoked = false

    package init() {}

    /// Adds a job; `false` when the queue is closed (the job will never run). An `urgent` job goes
    /// after the urgent ones already queued and ahead of every other.
    package func enqueue(_ job: Job, urgent: Bool = false) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isClosed else { return false }
        queued += 1
        if urgent {
            self.urgent.append(job)
            // More urgent jobs than idle workers: one waits for a busy worker unless a reserved
            // one takes it. An idle worker, when there is one, is the one `signal` below wakes.
            if urgentCount > idleWorkers { callReserve() }
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
        while isEmptyLocked && !isClosed {
            idleWorkers += 1
            condition.wait()
            idleWorkers -= 1
        }
        return !isEmptyLocked
    }

    private var isEmptyLocked: Bool { queued == 0 }

    /// For a worker kept for urgent jobs (the live path's reads, `OrderStore.urgentRead`): waits
    /// for an urgent job and takes up to `limit` of them, never another kind; `nil` once the queue
    /// is closed and holds no urgent job. It is woken only when an urgent job finds every other
    /// worker busy, so long jobs (a reconnect storm's replays) hold up no urgent one, or by
    /// `wakeKeptWorkers`, which makes it return no job (an empty batch).
    package func take(upTo limit: Int, urgentOnly: Bool) -> [Job]? {
        guard urgentOnly else { return take(upTo: limit) }
        while true {
            condition.lock()
            if urgentCount > 0 {
                defer { condition.unlock() }
                return takeLocked(upTo: min(limit, urgentCount))
            }
            let closed = isClosed
            condition.unlock()
            if closed { return nil }
            // A call made after the check above is not missed: `reserveCalled` stays set until read.
            reserve.lock()
            keptWorkersAsleep += 1
            while !reserveCalled && !reserveClosed && !reservePoked { reserve.wait() }
            keptWorkersAsleep -= 1
            reserveCalled = false
            let poked = reservePoked && !reserveClosed
            reservePoked = false
            reserve.unlock()
            if poked { return [] }
        }
    }

    /// Wakes the kept workers waiting in `take(upTo:urgentOnly: true)` without a job: each returns
    /// an empty batch, to look after its connection (the PostgreSQL kept reader's checks). A
    /// worker not waiting now returns an empty batch from its next wait.
    package func wakeKeptWorkers() {
        reserve.lock()
        reservePoked = true
        reserve.broadcast()
        reserve.unlock()
    }

    /// Wakes the reserved workers (inside `condition`'s lock, or after the close).
    private func callReserve(closing: Bool = false) {
        reserve.lock()
        reserveCalled = true
        if closing { reserveClosed = true }
        reserve.broadcast()
        reserve.unlock()
    }

    private func takeLocked(upTo limit: Int) -> [Job] {
        var batch = urgent.take(upTo: limit)
        if batch.count < limit {
            let rest = jobs.take(upTo: limit - batch.count)
            if batch.isEmpty { batch = rest } else { batch += rest }
        }
        queued -= batch.count
        // Another worker sharing this queue may take what is left.
        if !isEmptyLocked { condition.signal() }
        return batch
    }

    // MARK: Shared with a thread that runs jobs itself (the SQLite writer's inline path)

    /// Until `endQuietEnqueues`, jobs the calling thread queues wake no worker: it runs them itself
    /// (`takeOwn`), or leaves them for a worker and wakes it then. One such thread at a time.
    /// Returns whether the queue was empty: if not, the scope takes nothing (`takeOwn`), as the
    /// work queued before it is a worker's and must not be overtaken.
    @discardableResult
    package func beginQuietEnqueues() -> Bool {
        condition.lock()
        defer { condition.unlock() }
        quietThread = pthread_self()
        quietMark = isEmptyLocked ? otherEnqueues : nil
        return quietMark != nil
    }

    /// Ends the quiet scope; wakes a worker if jobs are left (the quiet thread did not run them all).
    package func endQuietEnqueues() {
        condition.lock()
        defer { condition.unlock() }
        quietThread = nil
        quietMark = nil
        if !isEmptyLocked { condition.signal() }
    }

    /// Takes up to `limit` jobs, oldest first, without waiting; `nil` when none is queued.
    package func takeNow(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        return isEmptyLocked ? nil : takeLocked(upTo: limit)
    }

    /// For the quiet thread: takes up to `limit` jobs if all that is queued is its own (the queue
    /// was empty when its scope began and no other thread has queued since); `nil` otherwise —
    /// other threads' work (a prune, a batch of writes) is the worker's, however it is interleaved.
    package func takeOwn(upTo limit: Int) -> [Job]? {
        condition.lock()
        defer { condition.unlock() }
        guard let quietMark, quietMark == otherEnqueues, !isEmptyLocked else { return nil }
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
        urgent.prepend(contentsOf: taken)  // back at the front: an urgent job queued later goes behind them
        queued += taken.count
        condition.signal()
        return true
    }

    /// Refuses new jobs; workers finish the queued ones, then stop.
    package func close() {
        condition.lock()
        isClosed = true
        condition.broadcast()
        condition.unlock()
        callReserve(closing: true)
    }

    /// Kept workers asleep waiting to be called (tests watch it).
    package var keptWorkersAsleepCount: Int {
        reserve.lock()
        defer { reserve.unlock() }
        return keptWorkersAsleep
    }

    /// Workers asleep waiting for a job (kept workers not counted; tests watch it).
    package var idleWorkerCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return idleWorkers
    }

    /// Whether an urgent job waits, or the queue is closed: a kept worker about to do something
    /// slow of its own (a connect) should take the queue first.
    package var hasUrgentJobsOrIsClosed: Bool {
        condition.lock()
        defer { condition.unlock() }
        return urgentCount > 0 || isClosed
    }

    /// Jobs waiting to be taken.
    package var count: Int {
        condition.lock()
        defer { condition.unlock() }
        return queued
    }
}

/// Jobs in arrival order, taken from the front in O(1) per job: a taken job leaves an empty slot
/// (its reference released at once), and the slots are closed up only once they are at least half
/// of the storage, so each job is moved at most about once. (The standard library has no deque.)
package struct JobFIFO<Job> {
    private var slots: [Job?] = []
    private var head = 0

    package var count: Int { slots.count - head }
    package var isEmpty: Bool { head == slots.count }

    package init() {}

    package mutating func append(_ job: Job) { slots.append(job) }

    /// Puts `jobs` before every job queued, in their order.
    package mutating func prepend(contentsOf jobs: [Job]) {
        guard !jobs.isEmpty else { return }
        if head >= jobs.count {
            head -= jobs.count
            for (offset, job) in jobs.enumerated() { slots[head + offset] = job }
        } else {
            slots = jobs.map { Optional($0) } + slots[head...]
            head = 0
        }
    }

    /// Up to `limit` jobs from the front, oldest first.
    package mutating func take(upTo limit: Int) -> [Job] {
        let n = min(max(limit, 0), count)
        guard n > 0 else { return [] }
        var batch: [Job] = []
        batch.reserveCapacity(n)
        for index in head..<(head + n) {
            batch.append(slots[index]!)
            slots[index] = nil
        }
        head += n
        if head == slots.count {
            // A backlog's storage goes; a small one is kept for the next jobs.
            slots.removeAll(keepingCapacity: slots.capacity <= 1024)
            head = 0
        } else if head >= slots.count / 2 {
            slots.removeFirst(head)
            head = 0
        }
        return batch
    }
}
