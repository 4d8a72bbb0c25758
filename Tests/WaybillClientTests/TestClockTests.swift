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

    @Test func sleepersWakeInDeadlineOrderEachAtItsOwnInstant() async {
        let clock = TestClock()
        let log = Log()
        var tasks: [Task<Void, Never>] = []
        for seconds in [3, 1, 2] {
            tasks.append(Task {
                try? await clock.sleep(for: .seconds(seconds))
                await log.append("\(seconds)@\(clock.now.offset)")
            })
        }
        await eventually("sleeping") { clock.sleeperCount == 3 }
        await clock.advance(by: .seconds(10))
        for task in tasks { await task.value }
        #expect(await log.entries == ["1@1.0 seconds", "2@2.0 seconds", "3@3.0 seconds"])
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

actor Log {
    private(set) var entries: [String] = []
    func append(_ entry: String) { entries.append(entry) }
}
