import Foundation
import WaybillDomain
import WaybillStorage

/// Read receipts (SPEC §2, "Receipts"): the newest version the assigned driver's device showed.
extension SQLiteOrderStore.Transaction {
    func recordSeen(
        _ id: OrderID, version: Int, by driver: UserID, in company: CompanyID, at: Date
    ) throws -> OrderSummary? {
        guard version > 0 else { return nil }
        return try perform { () throws(SQLiteError) in
            // The receipt columns change: an order read before is read again by a later update.
            loaded[id] = nil
            loadedReceipts[id] = nil
            // Every rule in the WHERE clause, so the check and the write are one statement: the
            // driver's own order, a version that exists, newer than this driver's last receipt
            // (a receipt of another driver is replaced whatever its version).
            return try db.queryFirst(
                """
                UPDATE orders SET seen_driver_id = ?1, seen_version = ?2, seen_at = ?3
                WHERE id = ?4 AND company_id = ?5 AND driver_id = ?1 AND version >= ?2
                    AND (seen_driver_id IS NOT ?1 OR seen_version IS NULL OR seen_version < ?2)
                RETURNING \(Self.summaryColumns)
                """,
                [.id(driver), .int(version), .date(at), .id(id), .id(company)], Self.summary)
        }
    }
}
