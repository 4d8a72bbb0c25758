import Synchronization

/// Wakes one waiting task; signals that arrive while nobody waits are remembered (once), so a
/// burst of commits costs the relay one wake-up, not one per commit.
final class WakeSignal: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }
    private let state = Mutex(State())

    init() {}

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

    /// Returns at the next signal (at once if one is pending), after `timeout`, or when the task is
    /// cancelled, whichever is first. One waiter at a time.
    func wait(timeout: Duration, clock: any Clock<Duration>) async {
        // A signal already pending (commits arrived while the relay was busy, the common case under
        // load): return without arming a timer task, which would cost a task, a timer and a cancel.
        let wasPending = state.withLock { s -> Bool in
            defer { s.pending = false }
            return s.pending
        }
        if wasPending { return }
        let timer = Task { [weak self] in
            try? await clock.sleep(for: timeout)
            if !Task.isCancelled { self?.signal() }
        }
        defer { timer.cancel() }
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
    }
}
