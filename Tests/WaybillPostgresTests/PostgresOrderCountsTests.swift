import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// What only PostgreSQL's counters (migration 0016, `PostgresSchema.orderCounts`) must show: they
/// are taken at the commit, so a transaction elsewhere holding a status change of the company
/// uncommitted holds up no write of this node; and a change by hand (another company, with a new
/// status) moves both companies' counts.
@Suite(.timeLimit(.minutes(1)))
struct PostgresOrderCountsTests {
    @Test func anUncommittedStatusChangeElsewhereHoldsUpNoWrite() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let fixture = try await Fixture.seed(store)
        let acme = fixture.acme.id
        let (a, b) = try await store.write { tx in
            (
                try tx.insertOrder(sampleOrder(in: acme, number: "A", status: .assigned)).id!,
                try tx.insertOrder(sampleOrder(in: acme, number: "B", status: .assigned)).id!
            )
        }
        let database = databaseName(url)
        // Another session changes A from `assigned` to `accepted` and keeps its transaction open
        // until `released` has a row: with the counters taken at the statement, it would hold the
        // company's `assigned` and `accepted` rows all that time.
        _ = try await psql("CREATE TABLE released (at timestamptz DEFAULT now())", in: database)
        async let held = psql(
            heldTransaction(
                "UPDATE orders SET status = 'accepted' WHERE id = \(a.rawValue)",
                until: "EXISTS (SELECT 1 FROM released)"), in: database)
        #expect(try await aSessionSleeps(in: database))
        // Held up, it would fail at the 2 s lock timeout (the write throws).
        try await store.write { tx in
            var order = try #require(try tx.order(b, in: acme))
            order.status = .accepted
            order.version += 1
            _ = try tx.updateOrder(order)
        }
        // And the other transaction was still open when the write ended (its change not yet seen).
        #expect(
            try await psql("SELECT status FROM orders WHERE id = \(a.rawValue)", in: database) == "assigned",
            "the other transaction ended before the write did")
        _ = try await psql("INSERT INTO released DEFAULT VALUES", in: database)
        _ = try await held
        let counts = try await store.read { tx in try tx.orderCounts(in: acme, driver: nil) }
        #expect(counts == [.accepted: 2])
    }

    @Test func anOrderMovedToAnotherCompanyByHandMovesBothCounts() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let fixture = try await Fixture.seed(store)
        let (acme, globex) = (fixture.acme.id, fixture.globex.id)
        let moved = try await store.write { tx in
            _ = try tx.insertOrder(sampleOrder(in: acme, number: "Stays", status: .assigned))
            return try tx.insertOrder(sampleOrder(in: acme, number: "Moves", status: .assigned)).id!
        }
        _ = try await psql(
            "UPDATE orders SET company_id = \(globex.rawValue), status = 'new' WHERE id = \(moved.rawValue)",
            in: databaseName(url))
        let (left, joined) = try await store.read { tx in
            (try tx.orderCounts(in: acme, driver: nil), try tx.orderCounts(in: globex, driver: nil))
        }
        #expect(left == [.assigned: 1])
        #expect(joined == [.new: 1])
    }
}
