import Foundation
import Testing
import WaybillDomain
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// The pruner runs only under its lease, and prunes relayed events and old session records.
@Suite(.timeLimit(.minutes(1)))
struct OutboxPrunerTests {
    static func prepare(_ store: any OrderStore) async throws -> Int {
        let events = try await store.append(4)
        try await store.write { tx in
            try tx.markRelayed(through: events[3].id)
            let user = try tx.insertUser(companyID: nil, role: .dispatcher, email: "a@example.com", name: "A", passwordHash: "x")
            try tx.revokeTokens(of: user.id)  // records a logout
        }
        return events.count
    }

    static func remaining(_ store: any OrderStore) async throws -> Int {
        try await store.read { tx in try tx.events(after: .zero, limit: 100).count }
    }

    @Test func prunesRelayedEventsAndSessionRecordsOnlyWhileHoldingItsLease() async throws {
        try await withStore { store in
            #expect(try await Self.prepare(store) == 4)
            let other = store.lease(OutboxPruner.leaseName)  // another node prunes
            #expect(await other.acquire())
            let clock = TestClock()
            let later = Date().addingTimeInterval(30 * 24 * 3600)  // past every retention
            let pruner = OutboxPruner(
                store: store, retention: .seconds(7 * 24 * 3600), interval: .seconds(3600), now: { later }, clock: clock,
                logger: Fixtures.logger)
            let running = Task { await pruner.run() }
            defer { running.cancel() }
            let prunedEarly = try await eventually(timeout: .milliseconds(300)) { try await Self.remaining(store) < 4 }
            #expect(!prunedEarly, "nothing is pruned while another node holds the lease")
            await other.release()
            let pruned = try await eventually { try await Self.remaining(store) == 1 }  // the newest stays
            #expect(pruned)
            // The logout record went too (in a transaction of its own, right after the events').
            let logoutsGone = try await eventually { try await store.read { tx in try tx.logouts(since: .distantPast) }.isEmpty }
            #expect(logoutsGone)
            running.cancel()
            await running.value
        }
    }

    /// More than one chunk is due: one run deletes it all but the newest, a chunk per transaction.
    @Test func oneRunPrunesEverythingDueInChunks() async throws {
        try await withStore { store in
            let count = OutboxPruner.chunk * 2 + 7
            let events = try await store.append(count)
            try await store.write { tx in try tx.markRelayed(through: events[count - 1].id) }
            let later = Date().addingTimeInterval(30 * 24 * 3600)
            let pruner = OutboxPruner(
                store: store, retention: .seconds(7 * 24 * 3600), interval: .seconds(3600), now: { later },
                logger: Fixtures.logger)
            await pruner.pruneOnce()
            #expect(try await store.read { tx in try tx.prunedThrough() } == events[count - 2].id)
            #expect(try await Self.remaining(store) == 1)
        }
    }
}
