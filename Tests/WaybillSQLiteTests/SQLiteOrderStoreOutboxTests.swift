import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// The query plan of the group read; outbox behaviour is tested in WaybillStoreConformanceTests.
@Suite struct SQLiteOrderStoreOutboxTests {
    @Test func theGroupReadIsAnIndexRangeScan() async throws {
        try await withStore { store, path in
            _ = store  // only its schema is needed
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            let details = try db.query(
                """
                EXPLAIN QUERY PLAN SELECT e.event_id FROM event_groups g JOIN events e ON e.event_id = g.event_id
                WHERE g.group_name = 'company_1' AND g.event_id > 5 ORDER BY g.event_id LIMIT 10
                """
            ) { $0.text(3) }  // the "detail" column
            #expect(
                details.contains { $0.contains("SEARCH g USING PRIMARY KEY (group_name=? AND event_id>?)") },
                "\(details)")
            #expect(!details.contains { $0.contains("TEMP B-TREE") }, "\(details)")
        }
    }

    /// Pruning deletes the pruned events' group rows by the primary key, group by group (there is
    /// no index by event id since migration 0006), and no other event's.
    @Test func pruningDeletesThePrunedEventsGroupRowsOnly() async throws {
        let clock = ManualClock()
        try await withStore(clock: clock) { store, path in
            let fixture = try await Fixture.seed(store)
            let toAlice = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, driver: fixture.alice.id))
            }
            let toBob = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2026/11/0002", driver: fixture.bob.id))
            }
            for (second, order) in [(1, toAlice), (2, toBob), (3, toAlice), (10, toBob)] {
                clock.set(t0 + Double(second))
                _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            }
            try await store.write { tx in try tx.markRelayed(through: EventID(4)) }
            // 1 and 2 go; 3 stays with 4, the first event kept.
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 5) } == 2)

            let rows = try rawQuery(path, "SELECT group_name || ':' || event_id FROM event_groups ORDER BY event_id, group_name")
            // Each event's rows: its company's (also its fleet's: `EventGroupRows`) and its driver's.
            #expect(createdEvent(toAlice).groups.contains(.fleet(fixture.acme.id)))
            let expected = ["company_\(fixture.acme.id):3", "driver_\(fixture.alice.id):3", "company_\(fixture.acme.id):4", "driver_\(fixture.bob.id):4"]
            #expect(rows.sorted() == expected.sorted(), "\(rows)")
            // The statement pruning runs: a primary-key range, not a scan (no index by event id since 0006).
            let db = try SQLiteConnection(path: path)
            defer { db.close() }
            let plan = try db.query(
                "EXPLAIN QUERY PLAN " + SQLiteOrderStore.Transaction.deleteGroupRange, [.text("x"), .integer(1), .integer(2)]
            ) { $0.text(3) }
            #expect(plan.contains { $0.contains("USING PRIMARY KEY (group_name=? AND event_id>? AND event_id<?)") }, "\(plan)")
        }
    }
}
