import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

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
}
