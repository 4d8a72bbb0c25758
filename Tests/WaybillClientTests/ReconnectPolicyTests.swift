import Testing
import WaybillTesting

@testable import WaybillClient

/// A generator that always returns the largest value, so full jitter picks the top of its range.
struct MaxGenerator: RandomNumberGenerator {
    mutating func next() -> UInt64 { .max }
}

@Suite(.timeLimit(.minutes(1))) struct ReconnectPolicyTests {
    @Test func standardBacksOffExponentiallyUpToSixtySeconds() {
        var random = MaxGenerator()
        let delays = (0..<9).map { ReconnectPolicy.standard.delay(forAttempt: $0, random: &random) }
        #expect(delays == [1, 2, 4, 8, 16, 32, 60, 60, 60].map { .seconds($0) })
    }

    @Test func standardNeverGivesUp() {
        var random = SeededGenerator(seed: 1)
        #expect(ReconnectPolicy.standard.delay(forAttempt: 10_000, random: &random) != nil)
        #expect(ReconnectPolicy.standard.delay(forAttempt: Int.max, random: &random) != nil)
    }

    @Test func fullJitterStaysWithinZeroAndTheExponentialDelay() {
        var random = SeededGenerator(seed: 7)
        for attempt in 0..<12 {
            let ceiling = min(Duration.seconds(60), .seconds(1) * (1 << attempt))
            var samples: [Duration] = []
            for _ in 0..<500 {
                let delay = ReconnectPolicy.standard.delay(forAttempt: attempt, random: &random)!
                #expect(delay >= .zero && delay <= ceiling)
                samples.append(delay)
            }
            // Full jitter spreads over the whole range, not just near the top or the bottom.
            #expect(samples.min()! < ceiling / 4)
            #expect(samples.max()! > ceiling * 3 / 4)
        }
    }

    @Test func fullJitterReachesTheTopOfItsRange() {
        var high = MaxGenerator()
        #expect(ReconnectPolicy.standard.delay(forAttempt: 3, random: &high) == .seconds(8))
    }

    @Test func sameSeedGivesSameDelays() {
        var a = SeededGenerator(seed: 99)
        var b = SeededGenerator(seed: 99)
        let first = (0..<10).map { ReconnectPolicy.standard.delay(forAttempt: $0, random: &a) }
        let second = (0..<10).map { ReconnectPolicy.standard.delay(forAttempt: $0, random: &b) }
        #expect(first == second)
    }

    @Test func classicRetriesAfterExactlyOneTwoFourSecondsThenGivesUp() {
        var random = SeededGenerator(seed: 3)
        let delays = (0..<5).map { ReconnectPolicy.classic.delay(forAttempt: $0, random: &random) }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), nil, nil])
    }

    @Test func customPolicyHonoursItsFields() {
        let policy = ReconnectPolicy(base: .milliseconds(500), cap: .seconds(3), maxAttempts: 5, jitter: .none)
        var random = SeededGenerator(seed: 3)
        let delays = (0..<6).map { policy.delay(forAttempt: $0, random: &random) }
        #expect(delays == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(3), .seconds(3), nil])
    }
}
