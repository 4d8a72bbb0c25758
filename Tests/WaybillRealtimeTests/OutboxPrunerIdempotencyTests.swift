import Foundation
import Testing
import WaybillDomain
import WaybillRealtime
import WaybillSQLite
import WaybillStorage

/// The pruner forgets `Idempotency-Key` records two days (its `idempotencyRetention`) after they were
/// last written, and keeps younger ones.
@Suite(.timeLimit(.minutes(1)))
struct OutboxPrunerIdempotencyTests {
    @Test func idempotencyRecordsGoAfterTheirRetentionAndNotBefore() async throws {
        try await withStore { store in
            let now = Date(timeIntervalSince1970: 1_764_500_000)
            for (key, age) in [("old", 2 * 86_400.0 + 1), ("young", 2 * 86_400.0 - 60)] {
                let request = IdempotentRequest(
                    userID: UserID(1), key: key, method: "POST", path: "/api/orders", fingerprint: [1])
                _ = try await store.write { tx in
                    try tx.claimIdempotencyKey(request, token: key, at: now - age, staleAfter: 30)
                }
            }
            let pruner = OutboxPruner(
                store: store, retention: .seconds(7 * 86_400), interval: .seconds(3600), now: { now }, logger: Fixtures.logger)
            await pruner.pruneOnce()
            let left = try await store.write { tx in
                (try tx.idempotencyRecord("old", of: UserID(1)), try tx.idempotencyRecord("young", of: UserID(1)))
            }
            #expect(left.0 == nil)
            #expect(left.1?.token == "young")
        }
    }
}
