import Synchronization
import Testing
import WaybillTesting

@Suite(.timeLimit(.minutes(1))) struct TestClockTests {
    @Test func sleeperWakesOnlyWhenItsDeadlinePasses() async {
        let clock = TestClock()
        let woke = Flag()
        let task = Task {
            try? await clock.sleep(for: .seconds(5))
            await woke.set()
        }
        await eventually("sleeping") { clock.sleeperCount == 1 }
        await clock.advance(by: .seconds(4))
        #expect(await !woke.value)
        await clock.advance(by: .seconds(1))
        await eventually("woke") { await woke.value }
        #expect(clock.now == TestClock.Instant(offset: .seconds(5)))
        _ = await task.value
    }

    @Test func advancePastSeveralDeadlinesWakesEverySleeperNoEarlierThanItsDeadline() async {
        let clock = TestClock()
        let log = LockedLog()
        await withTaskGroup(of: Void.self) { group in
            for seconds in [3, 1, 2] {
                group.addTask {
                    try? await clock.sleep(until: TestClock.Instant(offset: .seconds(seconds)))
                    log.append(clock.now.offset >= .seconds(seconds) ? "\(seconds) on time" : "\(seconds) early")
                }
            }
            await eventually("sleeping") { clock.sleeperCount == 3 }
            await clock.advance(by: .seconds(10))
        }
        // Which task logs first is up to the scheduler; that each waited for its deadline is not.
        #expect(log.entries.sorted() == ["1 on time", "2 on time", "3 on time"])
        #expect(clock.now.offset == .seconds(10))
        #expect(clock.sleeperCount == 0)
    }

    @Test func aSleeperThatSleepsAgainDuringAnAdvanceIsWokenAgainIfDue() async {
        let clock = TestClock()
        let ticks = LockedLog()
        let task = Task {
            for tick in 1...3 {
                try? await clock.sleep(until: TestClock.Instant(offset: .seconds(tick)))
                ticks.append("\(tick)")
            }
        }
        await eventually("sleeping") { clock.sleeperCount == 1 }
        await clock.advance(by: .seconds(3))
        await eventually("all ticks") { ticks.entries.count == 3 }
        await task.value
        #expect(ticks.entries == ["1", "2", "3"])
    }

    @Test func cancellingASleeperThrowsAndRemovesIt() async {
        let clock = TestClock()
        let task = Task { try await clock.sleep(for: .seconds(60)) }
        await eventually("sleeping") { clock.sleeperCount == 1 }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test func sleepingUntilThePastReturnsAtOnce() async throws {
        let clock = TestClock()
        await clock.advance(by: .seconds(10))
        try await clock.sleep(until: TestClock.Instant(offset: .seconds(3)))
        #expect(clock.sleeperCount == 0)
    }
}

actor Flag {
    private(set) var value = false
    func set() { value = true }
}

/// A log that any task can append to synchronously.
final class LockedLog: Sendable {
    private let storage = Mutex<[String]>([])
    func append(_ entry: String) { storage.withLock { $0.append(entry) } }
    var entries: [String] { storage.withLock { $0 } }
}
