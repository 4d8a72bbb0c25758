import Dispatch
import Foundation
import Synchronization

/// Runs password key stretching (PBKDF2) on a fixed set of threads with a bounded wait queue.
///
/// Why: each check burns tens of milliseconds of CPU on purpose. On an unbounded concurrent
/// queue, a login flood got a thread per request and starved everything else on the machine
/// (health checks took seconds, WebSocket delivery stalled). Here at most `threads` checks run at
/// once — fewer than the cores, so one core always stays free for serving — at most `queueLimit`
/// wait, and anything beyond is refused at once (`Overloaded`: the API answers 503 with
/// `Retry-After`) instead of queueing without end.
///
/// Jobs come in two kinds so a flood cannot crowd out real users: `preferred` jobs (logins from
/// an address with no recent failures) go ahead of the others and may use the whole queue, while
/// the others may fill it only up to `queueLimit - reservedForPreferred`.
final class KeyStretchingPool: Sendable {
    /// The queue is full (or the pool stopped): try again shortly.
    struct Overloaded: Error, Equatable {}

    /// A queued job: `run` on a worker, or `refuse` if the pool stops first (its caller still resumes).
    private struct Job {
        var preferred: Bool
        var run: @Sendable () -> Void
        var refuse: @Sendable () -> Void
    }

    private struct State {
        var waiting: [Job] = []
        var stopped = false
    }

    let threads: Int
    let queueLimit: Int
    /// Queue places only preferred jobs may take.
    let reservedForPreferred: Int
    private let state = Mutex(State())
    /// One signal per queued job (or per worker on stop).
    private let signal = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - threads: worker threads; `nil` = one fewer than the cores, at least one.
    ///   - queueLimit: jobs that may wait for a worker; further ones are refused.
    init(threads: Int? = nil, queueLimit: Int = 16) {
        self.threads = max(1, threads ?? ProcessInfo.processInfo.activeProcessorCount - 1)
        self.queueLimit = max(0, queueLimit)
        self.reservedForPreferred = self.queueLimit > 1 ? max(1, self.queueLimit / 4) : 0
        for index in 0..<self.threads {
            let thread = Thread { [self] in work() }
            thread.name = "waybill.key-stretching.\(index)"
            thread.start()
        }
    }

    /// Process-wide pool for hashers made without one (tools, seeding outside a server).
    static let shared = KeyStretchingPool()

    /// Jobs waiting for a worker now (not counting those running).
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Runs `job` on a worker thread and returns its result.
    /// - Parameter preferred: goes ahead of non-preferred waiting jobs and may use the reserved places.
    /// - Throws: `Overloaded` immediately when the queue has no place for it.
    func run<T: Sendable>(preferred: Bool = false, _ job: @escaping @Sendable () -> T) async throws -> T {
        let limit = preferred ? queueLimit : queueLimit - reservedForPreferred
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let accepted = state.withLock { state -> Bool in
                guard !state.stopped, state.waiting.count < limit else { return false }
                let entry = Job(
                    preferred: preferred, run: { continuation.resume(returning: job()) },
                    refuse: { continuation.resume(throwing: Overloaded()) })
                if preferred {
                    // FIFO among preferred jobs, all of them ahead of the rest.
                    let place = state.waiting.firstIndex { !$0.preferred } ?? state.waiting.endIndex
                    state.waiting.insert(entry, at: place)
                } else {
                    state.waiting.append(entry)
                }
                return true
            }
            if accepted { signal.signal() } else { continuation.resume(throwing: Overloaded()) }
        }
    }

    /// Stops the workers once they finish their current job; waiting jobs are refused.
    func stop() {
        let dropped = state.withLock { state -> [Job] in
            state.stopped = true
            defer { state.waiting.removeAll() }
            return state.waiting
        }
        for job in dropped { job.refuse() }
        for _ in 0..<threads { signal.signal() }
    }

    private func work() {
        while true {
            signal.wait()
            let next = state.withLock { state -> Job?? in
                if state.waiting.isEmpty { return state.stopped ? .some(nil) : .none }
                return .some(state.waiting.removeFirst())
            }
            switch next {
            case .some(.some(let job)): job.run()
            case .some(.none): return  // stopped
            case .none: continue
            }
        }
    }
}
