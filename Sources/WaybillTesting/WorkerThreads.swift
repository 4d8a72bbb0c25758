import Foundation

/// Threads of a test's own that run the closures handed to them, in order, for work that must not
/// run on the cooperative pool (two threads on a 2-core machine, shared by every test in the
/// process) or that must come from one fixed thread. `shutdown()` ends the threads once the queue
/// is empty.
public final class WorkerThreads: @unchecked Sendable {
    // @unchecked: `jobs` and `isShutDown` are only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var jobs: [@Sendable () -> Void] = []
    private var isShutDown = false

    public init(name: String = "test-worker", count: Int = 1) {
        for index in 0..<max(count, 1) {
            let thread = Thread { [self] in run() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    /// Queues `job` for the next free thread.
    public func submit(_ job: @escaping @Sendable () -> Void) {
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Lets the threads end after the jobs already queued.
    public func shutdown() {
        condition.lock()
        isShutDown = true
        condition.broadcast()
        condition.unlock()
    }

    private func run() {
        while true {
            condition.lock()
            while jobs.isEmpty && !isShutDown { condition.wait() }
            if jobs.isEmpty {
                condition.unlock()
                return
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job()
        }
    }
}

/// A `TaskExecutor` on `WorkerThreads`, for tests whose code blocks on purpose (a hub whose service
/// thread is stuck): `Task(executorPreference: executor) { … }` runs the task's code, and its child
/// tasks', there, so the block holds one of these threads and not one of the cooperative pool's.
/// With more than one thread the task's other children go on while one is blocked.
public final class ThreadExecutor: TaskExecutor, Sendable {
    private let workers: WorkerThreads

    public init(name: String = "test-executor", threads: Int = 2) {
        workers = WorkerThreads(name: name, count: threads)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job), executor = asUnownedTaskExecutor()
        workers.submit { job.runSynchronously(on: executor) }
    }

    /// Lets the threads end after the jobs already queued.
    public func shutdown() { workers.shutdown() }
}
