import Foundation
import WaybillDomain
import WaybillStorage

/// `Idempotency-Key` records (see `IdempotencyRecords`), shared by every node.
///
/// Writes run at READ COMMITTED. A claim inserts with `ON CONFLICT DO NOTHING`: when another
/// node's transaction inserted the same key and has not committed yet, PostgreSQL makes this
/// insert wait for it, so of two concurrent claims exactly one inserts. The loser then reads the
/// winner's committed row `FOR UPDATE` (waiting, if the winner is completing it right now) and
/// applies the same verdict as SQLite.
extension PostgresOrderStore.Transaction {
    private static let recordColumns =
        "user_id, key, method, path, fingerprint, token, updated_at, status, headers, body"

    private static func decodeRecord(_ row: PostgresRow) throws(PostgresError) -> IdempotencyRecord {
        let request = IdempotentRequest(
            userID: UserID(try row.int64(0)), key: row.text(1), method: row.text(2), path: row.text(3),
            fingerprint: row.bytes(4))
        let response = try row.optionalInt64(7).map { status in
            StoredResponse(
                status: Int(status), headers: StoredResponse.headers(fromText: row.optionalText(8) ?? ""),
                body: row.bytes(9))
        }
        return IdempotencyRecord(request: request, token: row.text(5), updatedAt: try row.date(6), response: response)
    }

    func claimIdempotencyKey(
        _ request: IdempotentRequest, token: String, at now: Date, staleAfter: TimeInterval
    ) throws -> IdempotencyClaim {
        try perform { () throws(PostgresError) -> IdempotencyClaim in
            // A record released (deleted) between the insert and the read is simply claimed again.
            for _ in 0..<3 {
                let inserted = try execute(
                    """
                    INSERT INTO idempotency_keys (user_id, key, method, path, fingerprint, token, updated_at)
                    VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (user_id, key) DO NOTHING
                    """,
                    [
                        .id(request.userID), .text(request.key), .text(request.method), .text(request.path),
                        .bytea(request.fingerprint), .text(token), .date(now),
                    ]
                ).affectedRows
                if inserted == 1 { return .claimed }
                let existing = try queryFirst(
                    "SELECT \(Self.recordColumns) FROM idempotency_keys WHERE user_id = $1 AND key = $2 FOR UPDATE",
                    [.id(request.userID), .text(request.key)], Self.decodeRecord)
                guard let existing else { continue }
                switch existing.verdict(for: request, at: now, staleAfter: staleAfter) {
                case .replay(let response): return .replay(response)
                case .inUse: return .inUse
                case .reused: return .reused
                case .takeOver:
                    _ = try execute(
                        """
                        UPDATE idempotency_keys SET token = $1, updated_at = $2
                        WHERE user_id = $3 AND key = $4 AND status IS NULL
                        """,
                        [.text(token), .date(now), .id(request.userID), .text(request.key)])
                    return .claimed
                }
            }
            return .inUse
        }
    }

    func completeIdempotencyKey(
        _ key: String, of user: UserID, token: String, response: StoredResponse, at now: Date
    ) throws -> Bool {
        try perform { () throws(PostgresError) -> Bool in
            // The row lock taken here is held to commit: a concurrent takeover or claim waits, then
            // sees the response (READ COMMITTED re-checks the WHERE on the newest row version).
            try execute(
                """
                UPDATE idempotency_keys SET status = $1, headers = $2, body = $3, updated_at = $4
                WHERE user_id = $5 AND key = $6 AND token = $7 AND status IS NULL
                """,
                [
                    .int(response.status), .text(response.headerText), .bytea(response.body), .date(now), .id(user),
                    .text(key), .text(token),
                ]
            ).affectedRows == 1
        }
    }

    /// A claim whose COMMIT's outcome was unknown (the call's deadline passed during it) may still
    /// be committing when its release runs, and a DELETE at READ COMMITTED neither sees nor waits
    /// for a row another transaction inserted and has not committed: the claim then landed after
    /// the release and held the key "in progress" for its 30 s (a review, 2026-12-07). An insert of
    /// the same key first waits for that transaction, as two claims do; when nothing holds the key,
    /// it inserts a row of this token, which the DELETE takes away again in the same transaction.
    func releaseIdempotencyKey(_ key: String, of user: UserID, token: String) throws {
        try perform { () throws(PostgresError) in
            _ = try execute(
                """
                INSERT INTO idempotency_keys (user_id, key, method, path, fingerprint, token, updated_at)
                VALUES ($1, $2, '', '', ''::bytea, $3, 0) ON CONFLICT (user_id, key) DO NOTHING
                """,
                [.id(user), .text(key), .text(token)])
            _ = try execute(
                "DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND token = $3 AND status IS NULL",
                [.id(user), .text(key), .text(token)])
        }
    }

    func idempotencyRecord(_ key: String, of user: UserID) throws -> IdempotencyRecord? {
        try perform { () throws(PostgresError) in
            try queryFirst(
                "SELECT \(Self.recordColumns) FROM idempotency_keys WHERE user_id = $1 AND key = $2",
                [.id(user), .text(key)], Self.decodeRecord)
        }
    }

    func pruneIdempotencyKeys(before cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(PostgresError) -> Int in
            try execute(
                """
                DELETE FROM idempotency_keys WHERE (user_id, key) IN
                    (SELECT user_id, key FROM idempotency_keys WHERE updated_at < $1 ORDER BY updated_at LIMIT $2)
                """,
                [.date(cutoff), .integer(Int64(clamping: limit))]
            ).affectedRows
        }
    }
}
