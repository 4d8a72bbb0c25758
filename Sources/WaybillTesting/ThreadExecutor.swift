import Foundation
import Synchronization

/// A `TaskExecutor` on threads of its own, for tests whose code blocks on purpose (a hub whose
/// service thread is stuck): `Task(executorPreference: executor) { … }` runs the task's code, and
/// its child tasks', there, so the block holds one of these threads and not one of the cooperative
/// pool's (two on a 2-core machine, shared by every test in the process). With more than one thread
/// the task's other children go on while one is blocked. `shutdown()` ends the threads once the
/// queue is empty.
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `isShutDown` are only touched under `condition`'s lock.
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var isShutDown = false

    public init(name: String = "test-executor", threads: Int = 2) {
        for index in 0..<max(threads, 1) {
            let thread = Thread { [self] in run() }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
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
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
