import Foundation
import Synchronization
import Testing
import WaybillStorage
import WaybillTesting

/// One holder per key; waiters in arrival order, each until its own deadline (`KeyedGate`).
@Suite(.timeLimit(.minutes(1)))
struct KeyedGateTests {
    struct TimedOut: Error {}
    final class Arrivals: Sendable {
        let order = Mutex<[Int]>([])
    }

    @Test func waitersTakeTheKeyInTheirOrderAndOtherKeysAreFree() async throws {
        let gate = KeyedGate<Int>()
        let far = ContinuousClock.now + .seconds(30)
        try await gate.enter(1, until: far) { TimedOut() }
        try await gate.enter(2, until: far) { TimedOut() }  // another key: at once
        let arrivals = Arrivals()
        // Each waiter queued before the next starts (arrival order is what is kept).
        var waiters: [Task<Void, any Error>] = []
        for n in 1...3 {
            waiters.append(Task {
                try await gate.enter(1, until: far) { TimedOut() }
                arrivals.order.withLock { $0.append(n) }
                gate.leave(1)
            })
            #expect(await eventually { gate.waiting(for: 1) == n })
        }
        #expect(arrivals.order.withLock { $0 }.isEmpty, "nobody passes while the key is held")
        gate.leave(1)
        for waiter in waiters { try await waiter.value }
        #expect(arrivals.order.withLock { $0 } == [1, 2, 3])
        gate.leave(2)
        #expect(gate.heldKeys == 0)
    }

    /// `enterAll` holds none of its keys while it waits for a busy one: the free key stays free for
    /// others meanwhile; once the busy one is left it takes them all. A deadline met while it waits
    /// leaves it holding none.
    @Test func enterAllHoldsNoKeyWhileItWaits() async throws {
        let gate = KeyedGate<Int>()
        let far = ContinuousClock.now + .seconds(30)
        try await gate.enter(2, until: far) { TimedOut() }
        let all = Task { try await gate.enterAll([1, 2], until: far) { TimedOut() } }
        #expect(await eventually { gate.waiting(for: 2) == 1 })
        #expect(gate.tryEnter(1), "key 1 is free while it waits for key 2")
        gate.leave(1)
        gate.leave(2)
        try await all.value
        #expect(gate.isHeld(1) && gate.isHeld(2))
        gate.leave(1)
        gate.leave(2)
        #expect(gate.heldKeys == 0)
        // Out of time while it waits: it holds nothing.
        try await gate.enter(2, until: far) { TimedOut() }
        await #expect(throws: TimedOut.self) {
            try await gate.enterAll([1, 2], until: .now + .milliseconds(50)) { TimedOut() }
        }
        #expect(!gate.isHeld(1))
        gate.leave(2)
        #expect(gate.heldKeys == 0)
    }

    /// A waiter whose deadline comes first gives up with the caller's error and holds nothing; the
    /// waiter behind it still gets the key.
    @Test func aWaiterPastItsDeadlineGivesUpAndTheNextOneStillGetsTheKey() async throws {
        let gate = KeyedGate<Int>()
        try await gate.enter(7, until: .now + .seconds(30)) { TimedOut() }
        let early = Task { try await gate.enter(7, until: .now + .milliseconds(200)) { TimedOut() } }
        #expect(await eventually { gate.waiting(for: 7) == 1 })
        let late = Task {
            try await gate.enter(7, until: .now + .seconds(30)) { TimedOut() }
            gate.leave(7)
        }
        #expect(await eventually { gate.waiting(for: 7) == 2 })
        await #expect(throws: TimedOut.self) { try await early.value }
        #expect(gate.waiting(for: 7) == 1, "the one that gave up left the line")
        gate.leave(7)
        try await late.value
        #expect(gate.heldKeys == 0)
    }
}
