import Synchronization

/// A clock whose time moves only when a test calls ``advance(by:)`` (or ``run(maxSteps:)``).
///
/// Code under test sleeps on it exactly as on `ContinuousClock`; the test then moves time forward and every
/// sleeper whose deadline has passed is resumed, earliest first, each at its own instant. Nothing really waits,
/// so backoff, polling and debouncing are tested in microseconds. Modelled on Point-Free's `TestClock`.
///
/// ```swift
/// let clock = TestClock()
/// let task = Task { try await clock.sleep(for: .seconds(5)) }
/// await clock.advance(by: .seconds(5))   // `task` finishes
/// ```
///
/// Thread-safe: all state sits behind one `Mutex`; continuations are resumed outside the lock.
public final class TestClock: Clock, Sendable {
    /// A point on the test clock's time line: how far it is from the clock's start.
    public struct Instant: InstantProtocol, CustomStringConvertible {
        /// Time since the clock was created.
        public var offset: Duration
        /// An instant `offset` after the clock's start.
        public init(offset: Duration = .zero) { self.offset = offset }
        public func advanced(by duration: Duration) -> Self { .init(offset: offset + duration) }
        public func duration(to other: Self) -> Duration { other.offset - offset }
        public static func < (lhs: Self, rhs: Self) -> Bool { lhs.offset < rhs.offset }
        public var description: String { "t+\(offset)" }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant()
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
    }

    private let state = Mutex(State())

    /// A clock at `t+0` with nobody sleeping.
    public init() {}

    /// The clock's current instant; it changes only in ``advance(by:)``, ``advance(to:)`` and ``run(maxSteps:)``.
    public var now: Instant { state.withLock { $0.now } }

    /// The test clock has no resolution limit.
    public var minimumResolution: Duration { .zero }

    /// How many tasks are suspended in ``sleep(until:tolerance:)`` right now.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// When each suspended sleeper is due, earliest first (tests wait for a particular timer).
    public var deadlines: [Instant] { state.withLock { $0.sleepers.map(\.deadline).sorted() } }

    /// Suspends until the clock reaches `deadline`; returns at once if it already has.
    ///
    /// - Throws: `CancellationError` if the task is cancelled before or while it sleeps.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                // Checked under the lock: either the cancel handler finds this sleeper, or we see the flag here.
                let outcome = state.withLock { state -> Result<Bool, CancellationError> in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= state.now { return .success(true) }
                    state.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return .success(false)
                }
                switch outcome {
                case .failure(let error): continuation.resume(throwing: error)
                case .success(true): continuation.resume()
                case .success(false): break
                }
            }
        } onCancel: {
            // May run before the sleeper is registered; the `Task.isCancelled` check above covers that race.
            let cancelled = state.withLock { state -> Sleeper? in
                guard let index = state.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return state.sleepers.remove(at: index)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `duration`, resuming every sleeper whose deadline passes, earliest first.
    ///
    /// After resuming each group of sleepers that share a deadline it yields generously, so that the woken tasks
    /// (and whatever they start) run until they suspend again before time moves on.
    public func advance(by duration: Duration = .zero) async {
        await advance(to: now.advanced(by: duration))
    }

    /// Moves time forward to `deadline` (never backwards), resuming sleepers as ``advance(by:)`` does.
    public func advance(to deadline: Instant) async {
        await settle()
        await resumeSleepers(notAfter: deadline)
        moveNow(to: deadline)
        await settle()
    }

    /// Moves time forward by `duration` at once, as a suspended process (a phone asleep) finds it:
    /// every sleeper whose deadline passed resumes with the clock already at the end, where
    /// ``advance(by:)`` walks through each deadline in between.
    public func jump(by duration: Duration) async {
        await settle()
        let deadline = now.advanced(by: duration)
        moveNow(to: deadline)
        await resumeSleepers(notAfter: deadline)
        await settle()
    }

    /// Resumes the sleepers due by `deadline`, earliest first, letting each group run.
    private func resumeSleepers(notAfter deadline: Instant) async {
        while let due = popEarliest(notAfter: deadline) {
            for sleeper in due { sleeper.continuation.resume() }
            await settle()
        }
    }

    private func moveNow(to deadline: Instant) {
        state.withLock { state in
            if state.now < deadline { state.now = deadline }
        }
    }

    /// Advances to each pending deadline in turn until nobody sleeps, at most `maxSteps` times.
    ///
    /// Useful for "run until idle"; bounded because a periodic timer never lets the clock become idle.
    public func run(maxSteps: Int = 1000) async {
        for _ in 0..<maxSteps {
            guard let next = state.withLock({ $0.sleepers.map(\.deadline).min() }) else { return }
            await advance(to: next)
        }
    }

    /// Removes and returns the sleepers due at the earliest deadline not after `limit`, and sets `now` to it.
    private func popEarliest(notAfter limit: Instant) -> [Sleeper]? {
        state.withLock { state in
            guard let earliest = state.sleepers.map(\.deadline).min(), earliest <= limit else { return nil }
            if state.now < earliest { state.now = earliest }
            let due = state.sleepers.filter { $0.deadline <= earliest }
            state.sleepers.removeAll { $0.deadline <= earliest }
            return due.sorted { $0.id < $1.id }
        }
    }

    /// Lets other tasks run until they are likely suspended again.
    ///
    /// Swift cannot tell when every task is blocked, so this does what Point-Free's `megaYield` does: it hops
    /// through low-priority detached tasks many times, which lets the cooperative pool drain its queue.
    public func settle(rounds: Int = 60) async {
        for _ in 0..<rounds {
            await Task.detached(priority: .background) { await Task.yield() }.value
        }
    }
}
