import Testing
import WaybillRealtime

/// A node blind (broker lost, every store read failing) past the limit closes its sockets once per
/// spell; a read that works, the broker back, or a failure with the broker up ends the spell.
struct FeedBlindnessTests {
    /// The answers to failed reads at each time (seconds, broker down), in order.
    static func answers(_ failures: [(Double, Bool)], sawLifeBefore: Double? = nil) -> [Bool] {
        var blindness = FeedBlindness(limit: .seconds(10))
        return failures.map { at, brokerDown in
            if let sawLifeBefore, at == sawLifeBefore { blindness.sawLife() }
            return blindness.readFailed(at: .milliseconds(Int(at * 1000)), brokerDown: brokerDown)
        }
    }

    @Test func onlyAWholeSpellPastTheLimitActsAndOnlyOnce() {
        let acted = Self.answers(
            [(1, true), (10.9, true), (11, true), (30, true), (31, true), (41, true)], sawLifeBefore: 31)
        // 10 s after the first failure, once per spell; a read that worked (before 31 s) starts a new one.
        #expect(acted == [false, false, true, false, false, true])
    }

    @Test func aFailureWithTheBrokerUpEndsTheSpell() {
        let acted = Self.answers([(0, true), (5, false), (12, true), (22, true)])
        #expect(acted == [false, false, false, true], "counted from 12 s, not 0")
    }
}
