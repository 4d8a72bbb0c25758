import Dispatch
import Foundation
import Synchronization
import Testing
import WaybillTesting
@testable import WaybillAPI

/// The bounded pool behind password checks (hardening item 1).
@Suite(.timeLimit(.minutes(1)))
struct KeyStretchingPoolTests {
    @Test func refusesAtOnceWhenTheQueueIsFullAndPreferredJobsGoFirst() async throws {
        let pool = KeyStretchingPool(threads: 1, queueLimit: 4, maxWait: .seconds(120))  // no expiry here
        defer { pool.stop() }
        #expect(pool.reservedForPreferred == 1)
        let gate = DispatchSemaphore(value: 0)
        let order = Box<[String]>([])
        let running = Box(false)
        let blocker = Task { try await pool.run { running.withLock { $0 = true }; gate.wait() } }
        // The worker holds the blocker: nothing is waiting then.
        #expect(await eventually { running.withLock { $0 } && pool.waitingCount == 0 })
        var normal: [Task<Void, any Error>] = []
        for n in 0..<3 {
            normal.append(Task { try await pool.run { order.withLock { $0.append("n\(n)") } } })
            #expect(await eventually { pool.waitingCount == n + 1 })
        }
        // Non-preferred jobs may not take the reserved place: refused at once.
        let started = ContinuousClock.now
        await #expect(throws: KeyStretchingPool.Overloaded.self) { try await pool.run { () } }
        #expect(ContinuousClock.now - started < .seconds(1))
        // A preferred job may, and runs before the others.
        let preferred = Task { try await pool.run(preferred: true) { order.withLock { $0.append("p") } } }
        #expect(await eventually { pool.waitingCount == 4 })
        #expect(pool.hasRoomForPreferred)
        // The queue is full: another preferred job pushes out the newest non-preferred one.
        let second = Task { try await pool.run(preferred: true) { order.withLock { $0.append("p2") } } }
        await #expect(throws: KeyStretchingPool.Overloaded.self) { try await normal[2].value }
        #expect(pool.waitingCount == 4)
        gate.signal()
        try await blocker.value
        try await preferred.value
        try await second.value
        for task in normal.prefix(2) { try await task.value }
        #expect(order.withLock { $0 } == ["p", "p2", "n0", "n1"])
    }

    @Test func aJobThatWaitedTooLongIsRefusedInsteadOfRun() async throws {
        let pool = KeyStretchingPool(threads: 1, queueLimit: 2, maxWait: .milliseconds(100))
        defer { pool.stop() }
        let gate = DispatchSemaphore(value: 0)
        let running = Box(false), ran = Box(false)
        let blocker = Task {
            // The first job may itself wait past the 100 ms on a stalled runner and be refused, as
            // it should (seen once in a full local run): try again, bounded.
            for _ in 0..<50 {
                do {
                    try await pool.run { running.withLock { $0 = true }; gate.wait() }
                    return
                } catch is KeyStretchingPool.Overloaded {
                    continue
                } catch {
                    return
                }
            }
        }
        #expect(await eventually { running.withLock { $0 } })
        let stale = Task { try await pool.run { ran.withLock { $0 = true } } }
        #expect(await eventually { pool.waitingCount == 1 })
        try await Task.sleep(for: .milliseconds(200))  // the condition under test: maxWait passes
        gate.signal()
        await blocker.value
        await #expect(throws: KeyStretchingPool.Overloaded.self) { try await stale.value }
        #expect(!ran.withLock { $0 })
        // Fresh jobs still run. A try may itself wait past the 100 ms on a stalled runner (one CI
        // run took 7.5 s for this test) and be refused as it should: try again, bounded.
        var fresh: Int?
        for _ in 0..<50 where fresh == nil { fresh = try? await pool.run { 7 } }
        #expect(fresh == 7, "fresh jobs still run")
    }

    @Test func stopRefusesWaitingJobs() async throws {
        let pool = KeyStretchingPool(threads: 1, queueLimit: 2, maxWait: .seconds(120))
        let gate = DispatchSemaphore(value: 0)
        let running = Box(false)
        let blocker = Task { try await pool.run { running.withLock { $0 = true }; gate.wait() } }
        #expect(await eventually { running.withLock { $0 } })
        let waiting = Task { try await pool.run { 1 } }
        #expect(await eventually { pool.waitingCount == 1 })
        pool.stop()
        await #expect(throws: KeyStretchingPool.Overloaded.self) { try await waiting.value }
        gate.signal()
        try await blocker.value
        await #expect(throws: KeyStretchingPool.Overloaded.self) { try await pool.run { 2 } }
    }

    @Test func defaultsLeaveACoreFree() {
        let pool = KeyStretchingPool()
        defer { pool.stop() }
        #expect(pool.threads == max(1, ProcessInfo.processInfo.activeProcessorCount - 1))
    }

}

/// Shared mutable state for closures run on the pool's threads.
private final class Box<Value: Sendable>: Sendable {
    private let value: Mutex<Value>
    init(_ value: Value) { self.value = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { value.withLock { body(&$0) } }
}
