import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// SQLite specifics; the backend-neutral cases live in WaybillStoreConformanceTests.
@Suite struct SQLiteOrderStoreUsersTests {
    /// Swept once `TicketSweep.grace` past their expiry (the presenting node's clock may run ahead).
    @Test func expiredTicketsAreSweptWhenAnyTicketIsConsumed() async throws {
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            try await store.write { tx in
                for index in 0..<5 {
                    try tx.insertTicket(hash: [UInt8(index)], for: fixture.alice.id, epoch: SessionEpoch(0), expiresAt: t0 + Double(index))
                }
            }
            _ = try await store.write { tx in try tx.consumeTicket(hash: [0xFF], now: t0 + 3) }
            #expect(try rawQuery(path, "SELECT count(*) FROM ws_tickets") == ["5"], "within the grace: kept")
            _ = try await store.write { tx in try tx.consumeTicket(hash: [0xFF], now: t0 + TicketSweep.grace + 3) }
            #expect(try rawQuery(path, "SELECT count(*) FROM ws_tickets") == ["1"])
        }
    }
}
