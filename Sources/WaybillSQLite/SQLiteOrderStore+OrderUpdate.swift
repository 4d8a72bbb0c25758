import Foundation
import WaybillDomain
import WaybillStorage

/// Updating an order writes only what changed.
///
/// Why: every page a transaction dirties is appended to the WAL (two `pwrite`s per 4 KiB page) and
/// later checkpointed. Setting every column rewrote the entries of every index on `orders` (the
/// unique `number` index too) and every stage row with its index, changed or not: about 13 pages and
/// 26 `pwrite`s per write (`strace -c`), and the WAL `pwrite`s were 12 % of the server's CPU at 1 000
/// writes/s (docs/BENCHMARKS.md). Now an unchanged column is left out of the `UPDATE` and an
/// unchanged stage is not written at all.
extension SQLiteOrderStore.Transaction {
    /// The columns `updateOrder` may set besides `updated_at` and `version` (always set): a write
    /// always bumps the version. At most 2⁶ statement texts exist, so the statement cache stays bounded.
    private static let optionalColumns = ["number", "status", "driver_id", "title", "notes", "created_at"]

    /// The `UPDATE` for each set of changed columns (bit `i`: `optionalColumns[i]`), built once:
    /// built per write, the text cost its concatenation and, at a new address each time, a hash of
    /// the whole text in the statement cache (`SQLiteConnection.cachedStatement`).
    private static let updateStatements: [String] = (0..<(1 << optionalColumns.count)).map { changed in
        var sql = "UPDATE orders SET "
        for (index, column) in optionalColumns.enumerated() where changed & (1 << index) != 0 {
            sql += column + " = ?, "
        }
        return sql + "updated_at = ?, version = ? WHERE id = ? AND company_id = ?"
    }

    func updateOrder(_ order: Order) throws -> Order {
        guard let id = order.id else { throw StoreError.notFound }
        let stored = try perform { () throws(SQLiteError) -> Order? in
            // The closure read the order before changing it (OrderService does): no second read.
            var found = loaded[id]
            if found == nil { found = try loadOrder(id, in: order.companyID) }
            guard let before = found, before.companyID == order.companyID else { return nil }
            // Forgotten until the final read: if a statement below fails and the closure catches the
            // error and goes on, the next update must compare with the row as stored, not with `before`.
            loaded[id] = nil
            // The statement names only the changed columns, in `optionalColumns` order: one of the
            // 2⁶ texts of `updateStatements`, by which columns changed.
            var changed = 0
            var arguments: [SQLiteValue] = []
            arguments.reserveCapacity(Self.optionalColumns.count + 4)
            // `after` is the row as this statement leaves it: `before` (as read) with the changed
            // columns set, dates as stored.
            var after = before
            func compare(_ column: Int, _ new: SQLiteValue, _ old: SQLiteValue, _ apply: (inout Order) -> Void) {
                guard new != old else { return }
                changed |= 1 << column
                arguments.append(new)
                apply(&after)
            }
            compare(0, .text(order.number), .text(before.number)) { $0.number = order.number }
            compare(1, .text(order.status.rawValue), .text(before.status.rawValue)) { $0.status = order.status }
            compare(2, .id(order.driverID), .id(before.driverID)) { $0.driverID = order.driverID }
            compare(3, .text(order.title), .text(before.title)) { $0.title = order.title }
            compare(4, .text(order.notes), .text(before.notes)) { $0.notes = order.notes }
            compare(5, .date(order.createdAt), .date(before.createdAt)) { $0.createdAt = order.createdAt.sqliteRoundTripped }
            after.updatedAt = order.updatedAt.sqliteRoundTripped
            after.version = order.version
            // Appended one by one: `+= [ … ]` built a temporary array for them first.
            arguments.append(.date(order.updatedAt))
            arguments.append(.int(order.version))
            arguments.append(.id(id))
            arguments.append(.id(order.companyID))
            try db.execute(Self.updateStatements[changed], arguments)
            guard db.changes > 0 else { return nil }
            if order.stages != before.stages || order.documents.contains(where: { $0.id == nil }) {
                // Before the statements: one may fail part-way and the closure catch it and commit.
                partsChanged.insert(id)
            }
            let stagesWritten = try syncStages(order.stages, of: id, existing: before.stages)
            var documentsWritten = false
            for document in order.documents where document.id == nil {
                _ = try insertDocument(document, of: id)
                documentsWritten = true
            }
            if !stagesWritten, !documentsWritten, let receipt = loadedReceipts[id] {
                // Nothing but the order's row changed: the answer is that row as the UPDATE left
                // it, not read back (one statement of a write's nine; the receipt counts only for
                // the driver assigned now, as when read). A test holds the two equal.
                after.seen = receipt.receipt(assignedTo: after.driverID)
                loaded[id] = after
                keepParts(of: after, id: id)  // the parts as read, now at the new version
                keepRow(after, receipt: receipt, id: id)
                return after
            }
            // Stages or documents were written: read back as stored (new ids). Those no statement
            // touched are the rows `before` was read from, and are not read again.
            return try loadOrder(
                id, in: order.companyID, stages: stagesWritten ? nil : before.stages,
                documents: documentsWritten ? nil : before.documents)
        }
        guard let stored else { throw StoreError.notFound }
        return stored
    }

    /// Listed stages with an id of this order are updated (only when they changed), the others
    /// inserted; unlisted ones deleted. `existing` are the order's stages as stored.
    /// Returns whether it wrote anything.
    private func syncStages(_ stages: [Stage], of order: OrderID, existing: [Stage]) throws(SQLiteError) -> Bool {
        // The usual write (a status, a driver, the notes) leaves the stages as read: nothing to compare.
        if stages == existing { return false }
        var written = false
        var stored: [Int64: Stage] = [:]
        for stage in existing { if let id = stage.id?.rawValue { stored[id] = stage } }
        var kept: Set<Int64> = []
        for stage in stages {
            // An id from another order is treated as new: a write never touches another order's rows.
            if let id = stage.id?.rawValue, let current = stored[id] {
                kept.insert(id)
                let values: [SQLiteValue] = [
                    .int(stage.position), .text(stage.kind.rawValue), .text(stage.address), .date(stage.plannedAt),
                    .date(stage.completedAt),
                ]
                let currentValues: [SQLiteValue] = [
                    .int(current.position), .text(current.kind.rawValue), .text(current.address),
                    .date(current.plannedAt), .date(current.completedAt),
                ]
                guard values != currentValues else { continue }
                try db.execute(
                    """
                    UPDATE stages SET position = ?, kind = ?, address = ?, planned_at = ?, completed_at = ?
                    WHERE id = ? AND order_id = ?
                    """,
                    values + [.integer(id), .id(order)])
                written = true
            } else {
                _ = try insertStage(stage, of: order)
                written = true
            }
        }
        for id in stored.keys where !kept.contains(id) {
            try db.execute("DELETE FROM stages WHERE id = ?", [.integer(id)])
            written = true
        }
        return written
    }
}
