import Synchronization
import Testing
import WaybillTesting

@testable import WaybillRealtime

/// The relay's wake-up: signals are remembered once, and a wait's timeout reuses the timer an
/// earlier wait armed instead of arming (and cancelling) one per wait.
@Suite(.timeLimit(.minutes(1)))
struct WakeSignalTests {
    final class Counter: Sendable {
        let count = Atomic<Int>(0)
        var value: Int { count.load(ordering: .relaxed) }
    }

    /// Starts a wait in a task; `done` turns true when it returns.
    private func startWait(
        _ signal: WakeSignal, timeout: Duration, now: Duration, clock: TestClock, done: Counter
    ) -> Task<Void, Never> {
        Task {
            await signal.wait(timeout: timeout, now: now, clock: clock)
            done.count.add(1, ordering: .relaxed)
        }
    }

    @Test func aPendingSignalEndsTheNextWaitAtOnceWithoutATimer() async {
        let signal = WakeSignal(), clock = TestClock()
        signal.signal()
        signal.signal()  // remembered once
        await signal.wait(timeout: .seconds(1), now: .zero, clock: clock)
        #expect(clock.sleeperCount == 0)
    }

    @Test func waitsReuseTheArmedTimer() async {
        let signal = WakeSignal(), clock = TestClock(), done = Counter()
        let first = startWait(signal, timeout: .seconds(1), now: .zero, clock: clock, done: done)
        #expect(await eventually { clock.sleeperCount == 1 })
        signal.signal()
        await first.value
        // The timer armed for t+1 s stays armed after the wait it was armed for ended.
        #expect(clock.sleeperCount == 1)
        await clock.advance(by: .milliseconds(500))
        // A wait until t+1.5 s uses it instead of arming its own, so it ends at t+1 s.
        let second = startWait(signal, timeout: .seconds(1), now: .milliseconds(500), clock: clock, done: done)
        #expect(await eventually { clock.sleeperCount == 1 && done.value == 1 })
        await clock.advance(by: .milliseconds(500))
        await second.value
        #expect(done.value == 2)
        #expect(await eventually { clock.sleeperCount == 0 })
    }

    @Test func aShorterTimeoutReplacesTheArmedTimer() async {
        let signal = WakeSignal(), clock = TestClock(), done = Counter()
        let first = startWait(signal, timeout: .seconds(5), now: .zero, clock: clock, done: done)
        #expect(await eventually { clock.sleeperCount == 1 })
        signal.signal()
        await first.value
        let second = startWait(signal, timeout: .milliseconds(100), now: .zero, clock: clock, done: done)
        // The 5 s timer is cancelled, so one sleeper is left: the 100 ms one (waited for by its
        // deadline: the count alone is 1 already while the old timer is still there).
        #expect(await eventually { clock.deadlines == [TestClock.Instant(offset: .milliseconds(100))] })
        await clock.advance(by: .milliseconds(100))
        await second.value
        #expect(done.value == 2)
    }

    @Test func aCancelledWaitReturnsAndDropsItsTimer() async {
        let signal = WakeSignal(), clock = TestClock(), done = Counter()
        let waiting = startWait(signal, timeout: .seconds(60), now: .zero, clock: clock, done: done)
        #expect(await eventually { clock.sleeperCount == 1 })
        waiting.cancel()
        await waiting.value
        #expect(await eventually { clock.sleeperCount == 0 })
    }

    /// A relay that stops leading outside a wait drops the timer its last wait armed.
    @Test func cancelTimerDropsTheArmedTimer() async {
        let signal = WakeSignal(), clock = TestClock(), done = Counter()
        let waiting = startWait(signal, timeout: .seconds(60), now: .zero, clock: clock, done: done)
        #expect(await eventually { clock.sleeperCount == 1 })
        signal.signal()
        await waiting.value
        #expect(clock.sleeperCount == 1)
        signal.cancelTimer()
        #expect(await eventually { clock.sleeperCount == 0 })
    }
}
