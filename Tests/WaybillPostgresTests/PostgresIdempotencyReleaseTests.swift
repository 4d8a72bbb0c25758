import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting

@Suite(.timeLimit(.minutes(1))) struct PostgresIdempotencyReleaseTests {
    /// A claim whose COMMIT was still under way when the server gave up on it (its outcome
    /// unknown) is released all the same: the release waits for that transaction instead of
    /// deleting nothing and letting the claim land after it, which held the key "in progress"
    /// for 30 s with nothing running (a review, 2026-12-07).
    @Test func aReleaseWaitsForAClaimStillCommitting() async throws {
        let url = try await freshDatabase()
        let database = databaseName(url)
        let store = try await openStore(url)
        defer { store.close() }
        _ = try await psql("CREATE TABLE hold_end (done int)", in: database)
        // Another session inserts the claim and keeps its transaction open until the release waits
        // for it (a lock on this transaction's id not granted: other tests share the server, and
        // `pg_stat_activity` is read once per transaction) or, without that wait, until the test
        // says so.
        let claim = Task {
            try await psql(
                heldTransaction(
                    """
                    INSERT INTO idempotency_keys (user_id, key, method, path, fingerprint, token, updated_at)
                    VALUES (7, 'k-1', 'POST', '/api/orders/', ''::bytea, 'claim-token', 1)
                    """,
                    until: """
                        EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'
                                AND transactionid::text = (txid_current() % 4294967296)::text)
                        OR EXISTS (SELECT 1 FROM hold_end)
                        """),
                in: database)
        }
        #expect(try await aSessionSleeps(in: database))
        try await store.write { tx in try tx.releaseIdempotencyKey("k-1", of: UserID(7), token: "claim-token") }
        _ = try await psql("INSERT INTO hold_end VALUES (1)", in: database)
        _ = try await claim.value
        let left = try await store.write { tx in try tx.idempotencyRecord("k-1", of: UserID(7)) }
        #expect(left == nil, "the claim outlived its release: \(String(describing: left))")
    }

    /// The release of a key nothing holds leaves nothing behind (its insert is its own to delete),
    /// and a key another request holds is not touched.
    @Test func aReleaseLeavesOtherClaimsAlone() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let request = IdempotentRequest(
            userID: UserID(7), key: "k-2", method: "POST", path: "/api/orders/", fingerprint: [1, 2, 3])
        let claimed = try await store.write { tx in
            try tx.claimIdempotencyKey(request, token: "other-token", at: Date(timeIntervalSince1970: 1_800_000_000), staleAfter: 30)
        }
        #expect(claimed == .claimed)
        try await store.write { tx in
            try tx.releaseIdempotencyKey("k-2", of: UserID(7), token: "claim-token")
            try tx.releaseIdempotencyKey("k-3", of: UserID(7), token: "claim-token")
        }
        let held = try await store.write { tx in try tx.idempotencyRecord("k-2", of: UserID(7)) }
        #expect(held?.token == "other-token")
        let none = try await store.write { tx in try tx.idempotencyRecord("k-3", of: UserID(7)) }
        #expect(none == nil)
    }
}
