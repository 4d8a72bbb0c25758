import Foundation
import WaybillDomain
import WaybillStorage

/// `Idempotency-Key` records (see `IdempotencyRecords`). The single writer serializes every
/// claim, so checking and then inserting or taking over in one closure cannot race.
extension SQLiteOrderStore.Transaction {
    private static let recordColumns =
        "user_id, key, method, path, fingerprint, token, updated_at, status, headers, body"

    private static func decodeRecord(_ row: SQLiteRow) -> IdempotencyRecord {
        let request = IdempotentRequest(
            userID: UserID(row.int64(0)), key: row.text(1), method: row.text(2), path: row.text(3),
            fingerprint: row.blob(4))
        let response = row.optionalInt64(7).map { status in
            StoredResponse(
                status: Int(status), headers: StoredResponse.headers(fromText: row.optionalText(8) ?? ""),
                body: row.blob(9))
        }
        return IdempotencyRecord(request: request, token: row.text(5), updatedAt: row.date(6), response: response)
    }

    func claimIdempotencyKey(
        _ request: IdempotentRequest, token: String, at now: Date, staleAfter: TimeInterval
    ) throws -> IdempotencyClaim {
        try perform { () throws(SQLiteError) -> IdempotencyClaim in
            let existing = try db.queryFirst(
                "SELECT \(Self.recordColumns) FROM idempotency_keys WHERE user_id = ? AND key = ?",
                [.id(request.userID), .text(request.key)], Self.decodeRecord)
            guard let existing else {
                try db.execute(
                    """
                    INSERT INTO idempotency_keys (user_id, key, method, path, fingerprint, token, updated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """,
                    [
                        .id(request.userID), .text(request.key), .text(request.method), .text(request.path),
                        .blob(request.fingerprint), .text(token), .date(now),
                    ])
                return .claimed
            }
            switch existing.verdict(for: request, at: now, staleAfter: staleAfter) {
            case .replay(let response): return .replay(response)
            case .inUse: return .inUse
            case .reused: return .reused
            case .takeOver:
                try db.execute(
                    "UPDATE idempotency_keys SET token = ?, updated_at = ? WHERE user_id = ? AND key = ? AND status IS NULL",
                    [.text(token), .date(now), .id(request.userID), .text(request.key)])
                return .claimed
            }
        }
    }

    func completeIdempotencyKey(
        _ key: String, of user: UserID, token: String, response: StoredResponse, at now: Date
    ) throws -> Bool {
        try perform { () throws(SQLiteError) -> Bool in
            try db.execute(
                """
                UPDATE idempotency_keys SET status = ?, headers = ?, body = ?, updated_at = ?
                WHERE user_id = ? AND key = ? AND token = ? AND status IS NULL
                """,
                [
                    .int(response.status), .text(response.headerText), .blob(response.body), .date(now), .id(user),
                    .text(key), .text(token),
                ])
            return db.changes == 1
        }
    }

    func releaseIdempotencyKey(_ key: String, of user: UserID, token: String) throws {
        try perform { () throws(SQLiteError) in
            try db.execute(
                "DELETE FROM idempotency_keys WHERE user_id = ? AND key = ? AND token = ? AND status IS NULL",
                [.id(user), .text(key), .text(token)])
        }
    }

    func idempotencyRecord(_ key: String, of user: UserID) throws -> IdempotencyRecord? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst(
                "SELECT \(Self.recordColumns) FROM idempotency_keys WHERE user_id = ? AND key = ?",
                [.id(user), .text(key)], Self.decodeRecord)
        }
    }

    func pruneIdempotencyKeys(before cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(SQLiteError) -> Int in
            try db.execute(
                """
                DELETE FROM idempotency_keys WHERE rowid IN
                    (SELECT rowid FROM idempotency_keys WHERE updated_at < ? ORDER BY updated_at LIMIT ?)
                """,
                [.date(cutoff), .integer(Int64(clamping: limit))])
            return db.changes
        }
    }
}
