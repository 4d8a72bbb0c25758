import Synchronization

/// Wakes one waiting task; signals that arrive while nobody waits are remembered (once), so a
/// burst of commits costs the relay one wake-up, not one per commit.
///
/// The timeout of a wait is one timer task, kept across waits: a wait whose timeout ends no earlier
/// than the armed timer's reuses it. Arming and cancelling a timer on every wait cost a task, a
/// `dispatch_after` and a wake-up of libdispatch's timer thread per relayed event at low rates
/// (docs/BENCHMARKS.md, "Timers"). A wait may therefore end before its own timeout, at an earlier
/// wait's deadline: the relay treats such a wake-up like a poll.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
        /// The armed timer and when it fires, on the caller's stopwatch.
        var timer: (task: Task<Void, Never>, deadline: Duration)?
    }
    private let state = Mutex(State())

    init() {}

    deinit { cancelTimer() }

    /// Any thread, never blocks.
    func signal() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns at the next signal (at once if one is pending), after at most `timeout`, or when the
    /// task is cancelled, whichever is first. One waiter at a time. `now` is the caller's stopwatch
    /// reading on `clock` (existential clocks' instants cannot be compared).
    func wait(timeout: Duration, now: Duration, clock: any Clock<Duration>) async {
        // A signal already pending (commits arrived while the relay was busy, the common case under
        // load): return without touching the timer.
        let wasPending = state.withLock { s -> Bool in
            defer { s.pending = false }
            return s.pending
        }
        if wasPending { return }
        armTimer(firingAt: now + timeout, after: timeout, clock: clock)
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { s -> Bool in
                    if s.pending || Task.isCancelled {
                        s.pending = false
                        return true
                    }
                    s.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            signal()  // a cancelled relay must not wait for its poll timeout (or forever, on a test clock)
        }
        state.withLock { $0.pending = false }
        if Task.isCancelled { cancelTimer() }
    }

    /// Arms a timer for `deadline` unless the armed one fires no later; a later one is replaced.
    private func armTimer(firingAt deadline: Duration, after delay: Duration, clock: any Clock<Duration>) {
        let replaced = state.withLock { s -> Task<Void, Never>?? in
            if let armed = s.timer, armed.deadline <= deadline { return .none }
            let old = s.timer?.task
            let task = Task { [weak self] in
                guard (try? await clock.sleep(for: delay)) != nil, let self else { return }
                self.state.withLock { s in if s.timer?.deadline == deadline { s.timer = nil } }
                self.signal()
            }
            s.timer = (task, deadline)
            return .some(old)
        }
        if case .some(let old?) = replaced { old.cancel() }
    }

    /// Drops the armed timer (the waiter stops waiting: lease lost, task cancelled).
    func cancelTimer() {
        state.withLock { s in
            defer { s.timer = nil }
            return s.timer?.task
        }?.cancel()
    }
}
