import Foundation
import WaybillDomain
import WaybillStorage

/// Read receipts (SPEC §2, "Receipts"): the newest version the assigned driver's device showed.
extension PostgresOrderStore.Transaction {
    func recordSeen(
        _ id: OrderID, version: Int, by driver: UserID, in company: CompanyID, at: Date
    ) throws -> OrderSummary? {
        guard version > 0 else { return nil }
        // The receipt columns change: an order read before is read again by a later update.
        loaded[id] = nil
        loadedReceipts[id] = nil
        return try perform { () throws(PostgresError) in
            // Every rule in the WHERE clause, so the check and the write are one statement (the
            // row lock serializes it with a dispatcher's write of the same order): the driver's
            // own order, a version that exists, newer than this driver's last receipt (a receipt
            // of another driver is replaced whatever its version). `$2` is cast: PostgreSQL took its
            // type from `version` (32 bits), and a version past 2³¹−1 failed the whole write with
            // "integer out of range" where SQLite records nothing (a store comparison, 2026-12-05).
            try queryFirst(
                """
                UPDATE orders SET seen_driver_id = $1, seen_version = $2::bigint, seen_at = $3
                WHERE id = $4 AND company_id = $5 AND driver_id = $1 AND version >= $2::bigint
                    AND (seen_driver_id IS DISTINCT FROM $1 OR seen_version IS NULL OR seen_version < $2::bigint)
                RETURNING \(Self.summaryColumns)
                """,
                [.id(driver), .int(version), .date(at), .id(id), .id(company)], Self.summary)
        }
    }
}
