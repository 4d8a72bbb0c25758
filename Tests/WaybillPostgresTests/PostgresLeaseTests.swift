import Foundation
import Testing
@testable import WaybillPostgres
import WaybillStorage
import WaybillTesting

@Suite(.timeLimit(.minutes(1))) struct PostgresLeaseTests {
    @Test func aTerminatedHolderStepsDownAndAnotherNodeTakesOverWithinFiveSeconds() async throws {
        let url = try await freshDatabase()
        let nodeA = try await openStore(url, name: "node-a")
        let nodeB = try await openStore(url, name: "node-b")
        defer {
            nodeA.close()
            nodeB.close()
        }
        let holder = nodeA.lease("relay"), contender = nodeB.lease("relay")
        #expect(await holder.acquire())
        // The contender's acquire returns only once the holder's session is terminated.
        let terminating = Moment()
        let takeover = Task { (await contender.acquire(), terminating.hasCome) }
        try await Task.sleep(for: .milliseconds(600))
        #expect(!contender.isHeld)

        terminating.come()
        let start = ContinuousClock.now
        let terminated = try await psql(
            """
            SELECT count(pg_terminate_backend(pid)) FROM pg_locks
            WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = '\(databaseName(url))')
            """)
        #expect(terminated == "1")
        let (acquired, afterTermination) = await takeover.value
        #expect(acquired)
        #expect(afterTermination, "the contender got the lease while the holder's session lived")
        #expect(start.duration(to: .now) < .seconds(5))
        #expect(await eventually(timeout: .seconds(15), poll: .milliseconds(50)) { !holder.isHeld }, "the old holder notices at its next heartbeat")
        // The old holder asks again and gets it back once the new one lets go.
        let comeback = Task { await holder.acquire() }
        await contender.release()
        #expect(await comeback.value)
        #expect(await eventually(timeout: .seconds(5), poll: .milliseconds(50)) { holder.isHeld })
        await holder.release()
    }

    @Test func closingTheHoldingStoreHandsTheLeaseOver() async throws {
        let url = try await freshDatabase()
        let nodeA = try await openStore(url, name: "node-a")
        let nodeB = try await openStore(url, name: "node-b")
        defer { nodeB.close() }
        let holder = nodeA.lease("relay"), contender = nodeB.lease("relay")
        #expect(await holder.acquire())
        let takeover = Task { await contender.acquire() }
        let start = ContinuousClock.now
        nodeA.close()
        #expect(!holder.isHeld)
        #expect(await takeover.value)
        #expect(start.duration(to: .now) < .seconds(5))
        #expect(await holder.acquire() == false, "a closed store's lease is never acquired")
        await contender.release()
    }

    @Test func theHolderKeepsTheLeaseAcrossHeartbeats() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let lease = store.lease("pruner")
        #expect(await lease.acquire())
        // Several heartbeats (one a second) later it is still held, and still exclusive.
        try await Task.sleep(for: .milliseconds(2500))
        // Read until confirmed: a stalled runner may read just before the thread confirms again
        // (a lease that stepped down stays down, so this still fails a lost lease).
        #expect(await eventually(timeout: .seconds(5), poll: .milliseconds(50)) { lease.isHeld })
        let other = store.lease("pruner")
        let attempt = Task { await other.acquire() }
        try await Task.sleep(for: .milliseconds(500))
        attempt.cancel()
        #expect(await attempt.value == false)
        await lease.release()
        #expect(!lease.isHeld)
    }

    /// A lease whose last confirmation lapsed (the heartbeat thread could not confirm it in time)
    /// is not answered "held" by `acquire`, which a caller would find unheld and ask again, in a
    /// loop: `acquire` waits until the thread has confirmed it on its session again.
    @Test func acquiringALapsedLeaseWaitsUntilItIsConfirmedAgain() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        // Confirmations last 600 ms and heartbeats come every second: the lease lapses in between,
        // after every heartbeat (so a loaded machine that misses one window finds the next).
        let lease = store.lease("relay", confirmationLifetime: .milliseconds(600))
        #expect(await lease.acquire())
        #expect(await eventually(timeout: .seconds(5), poll: .milliseconds(50)) { !lease.isHeld }, "lapsed between heartbeats")
        // Acquired, and held when asked right after: a stall of more than the 600 ms lifetime between
        // the two lets it lapse again (correctly), so a lapse there is tried again (bounded).
        var heldAfterAcquiring = false
        for _ in 0..<10 where !heldAfterAcquiring { heldAfterAcquiring = await lease.acquire() && lease.isHeld }
        #expect(heldAfterAcquiring, "answered only once the thread confirmed it again")
        // Still this session's lock, and exclusive: another session cannot take it.
        let other = store.lease("relay")
        let attempt = Task { await other.acquire() }
        try await Task.sleep(for: .milliseconds(400))
        attempt.cancel()
        #expect(await attempt.value == false)
        await lease.release()
        #expect(!lease.isHeld)
    }
}
