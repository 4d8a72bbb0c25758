import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

@testable import WaybillPostgres

/// Migration 0015 on PostgreSQL: the store's own statement for a driver's recent half
/// (`OrderQuery.isRecentlyFinished(now:)`) is a range of `orders_finished_by_driver` once the table has
/// statistics (the planner chooses by cost, unlike SQLite's, which has none here), not a walk of
/// the driver's finished orders by id that checks each one's update time.
@Suite(.timeLimit(.minutes(1)))
struct PostgresOrderListPlanTests {
    @Test func aDriversRecentHalfIsARangeOfTheFinishedOrdersIndex() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let fixture = try await Fixture.seed(store)
        let database = databaseName(url)
        // 3 000 orders Alice finished long ago.
        _ = try await psql(
            """
            INSERT INTO orders (company_id, number, status, driver_id, title, notes, created_at, updated_at, version)
            SELECT \(fixture.acme.id.rawValue), 'H-' || i, CASE WHEN i % 7 = 0 THEN 'cancelled' ELSE 'completed' END,
                   \(fixture.alice.id.rawValue), 'Old load', '', i, i, 1
            FROM generate_series(1, 3000) AS i;
            ANALYZE orders;
            """, in: database)
        // `runs`: executions before the one explained. A prepared statement (the store's are) gets
        // a plan for its arguments' values five times; from the sixth PostgreSQL may keep one
        // made without them, if that costs no more (here it would walk the whole table by id,
        // so it must not be kept).
        func plan(_ query: OrderQuery, runs: Int) async throws -> String {
            let statement = PostgresOrderStore.Transaction.orderPageStatement(in: fixture.acme.id, query, windowEnd: nil, now: t0)
            let arguments = statement.arguments.map(Self.literal).joined(separator: ", ")
            let before = String(repeating: "EXECUTE page(\(arguments)); ", count: runs)
            return try await psql(
                "PREPARE page AS \(statement.sql); \(before)EXPLAIN EXECUTE page(\(arguments))", in: database)
        }
        for runs in [0, 8] {
            let recent = try await plan(
                OrderQuery(driver: fixture.alice.id, statuses: [.completed, .cancelled], updatedAfter: t0, limit: 500),
                runs: runs)
            #expect(recent.contains("orders_finished_by_driver"), "after \(runs) runs: \(recent)")
            #expect(!recent.contains("orders_by_driver_status"), "after \(runs) runs: \(recent)")
        }
        // And the rows are the same through the store: none of those is recent.
        let rows = try await store.read { tx in
            try tx.orderPage(
                in: fixture.acme.id,
                OrderQuery(driver: fixture.alice.id, statuses: [.completed, .cancelled], updatedAfter: t0, limit: 500))
        }
        #expect(rows.rows.isEmpty)
    }

    /// An argument as an SQL literal for `EXECUTE` (the tests' own values: integers and plain text).
    static func literal(_ value: PostgresValue) -> String {
        switch value {
        case .null: "NULL"
        case .integer(let number): String(number)
        case .text(let text): "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
        case .bool(let flag): flag ? "true" : "false"
        case .bytea: "NULL"
        }
    }
}
