import Foundation
import Testing

@testable import WaybillAPI

/// The 503 gate on plain values: an address told to wait a second is refused for free until then,
/// asking early does not move that second, and when it is over exactly one login goes through
/// while the rest wait for its answer.
@Suite struct RetryAfterGateTests {
    let t0 = Date(timeIntervalSince1970: 1_764_500_000)

    @Test func oneLoginPassesWhenTheSecondIsOverAndTheRestWaitForItsAnswer() {
        let gate = RetryAfterGate(seconds: 1)
        #expect(gate.passOne("a", now: t0) == .free, "no 503 yet: no gate")
        gate.refused("a", now: t0)
        #expect(gate.passOne("a", now: t0 + 0.5) == .wait)
        #expect(gate.passOne("a", now: t0 + 0.9) == .wait, "asking early did not move the second")
        // The second is over: one goes through, a flood's other requests in flight do not.
        #expect(gate.passOne("a", now: t0 + 1.0) == .passed)
        #expect(gate.passOne("a", now: t0 + 1.0) == .wait)
        #expect(gate.passOne("a", now: t0 + 1.5) == .wait)
        // That one was refused for overload again: a new second.
        gate.refused("a", now: t0 + 1.5)
        #expect(gate.passOne("a", now: t0 + 2.4) == .wait)
        #expect(gate.passOne("a", now: t0 + 2.6) == .passed)
        // That one got past the pool: the gate opens for everyone at the address.
        gate.cleared("a")
        #expect(gate.passOne("a", now: t0 + 2.6) == .free)
        #expect(gate.passOne("a", now: t0 + 2.6) == .free)
        #expect(gate.passOne("b", now: t0 + 2.6) == .free)
    }

    @Test func mustWaitLastsUntilTheTimeToldWhateverIsAsked() {
        let gate = RetryAfterGate(seconds: 10)
        gate.refused("a", now: t0)
        for offset in [1.0, 5.0, 9.9] { #expect(gate.mustWait("a", now: t0 + offset)) }
        #expect(!gate.mustWait("a", now: t0 + 10))
    }
}
