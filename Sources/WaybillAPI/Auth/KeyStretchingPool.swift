import Dispatch
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
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
/// an address with no recent failures) go ahead of the others, may use the whole queue and, when
/// it is full, push out the newest non-preferred job; the others may fill it only up to
/// `queueLimit - reservedForPreferred`. A job that waited longer than `maxWait` is refused instead
/// of run (its client has been told to retry): the wait is bounded in time, not only in count,
/// however slow the hashing gets on a busy machine.
final class KeyStretchingPool: Sendable {
    /// The queue is full (or the pool stopped): try again shortly.
    struct Overloaded: Error, Equatable {}

    /// A queued job: `run` on a worker, or `refuse` if the pool stops first (its caller still resumes).
    private struct Job {
        var preferred: Bool
        var deadline: ContinuousClock.Instant
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
    let maxWait: Duration
    private let state = Mutex(State())
    /// One signal per queued job (or per worker on stop).
    private let signal = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - threads: worker threads; `nil` = one fewer than the cores, at least one.
    ///   - queueLimit: jobs that may wait for a worker; further ones are refused.
    ///   - maxWait: a job still waiting after this long is refused rather than run.
    init(threads: Int? = nil, queueLimit: Int = 16, maxWait: Duration = .seconds(1)) {
        self.maxWait = maxWait
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

    /// Whether a preferred job would be accepted now (a cheap check before any other work).
    var hasRoomForPreferred: Bool {
        state.withLock { state in
            !state.stopped && (state.waiting.count < queueLimit || state.waiting.contains { !$0.preferred })
        }
    }

    /// Runs `job` on a worker thread and returns its result.
    /// - Parameter preferred: goes ahead of non-preferred waiting jobs and may use the reserved places.
    /// - Throws: `Overloaded` immediately when the queue has no place for it.
    func run<T: Sendable>(preferred: Bool = false, _ job: @escaping @Sendable () -> T) async throws -> T {
        let limit = preferred ? queueLimit : queueLimit - reservedForPreferred
        let deadline = ContinuousClock.now + maxWait
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let entry = Job(
                preferred: preferred, deadline: deadline, run: { continuation.resume(returning: job()) },
                refuse: { continuation.resume(throwing: Overloaded()) })
            let outcome = state.withLock { state -> Admission in
                guard !state.stopped else { return .refused }
                var evicted: Job?
                if state.waiting.count >= limit {
                    // Full: a preferred job takes the place of the newest non-preferred one.
                    guard preferred, let last = state.waiting.lastIndex(where: { !$0.preferred }) else { return .refused }
                    evicted = state.waiting.remove(at: last)
                }
                // FIFO among preferred jobs, all of them ahead of the rest.
                let place = preferred ? (state.waiting.firstIndex { !$0.preferred } ?? state.waiting.endIndex) : state.waiting.endIndex
                state.waiting.insert(entry, at: place)
                return evicted.map(Admission.replaced) ?? .queued
            }
            switch outcome {
            case .queued: signal.signal()
            case .replaced(let evicted): evicted.refuse()  // its signal now stands for the new job
            case .refused: entry.refuse()
            }
        }
    }

    private enum Admission {
        case queued
        case replaced(Job)
        case refused
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
        // Lower priority (nice 10) for this thread only: on Linux the nice value is per thread and
        // `who = 0` means the calling one. When the machine is busy, serving requests and
        // WebSocket frames wins over password hashing, which can wait (its clients can retry).
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        while true {
            signal.wait()
            let next = state.withLock { state -> Job?? in
                if state.waiting.isEmpty { return state.stopped ? .some(nil) : .none }
                return .some(state.waiting.removeFirst())
            }
            switch next {
            case .some(.some(let job)) where ContinuousClock.now > job.deadline: job.refuse()
            case .some(.some(let job)): job.run()
            case .some(.none): return  // stopped
            case .none: continue
            }
        }
    }
}
