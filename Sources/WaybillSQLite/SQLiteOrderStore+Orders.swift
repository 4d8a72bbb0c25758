internal import CSQLite
import Foundation
import WaybillDomain
import WaybillStorage

/// Orders with their stages and documents, and the per-company order number sequences.
extension SQLiteOrderStore.Transaction {
    static let summaryColumns =
        "id, number, status, driver_id, title, created_at, updated_at, version, seen_driver_id, seen_version, seen_at"

    /// A row of `summaryColumns`.
    static func summary(_ row: SQLiteRow) throws(SQLiteError) -> OrderSummary {
        let driver = row.optionalInt64(3).map(UserID.init)
        return OrderSummary(
            id: OrderID(row.int64(0)), number: row.text(1), status: try row.enumValue(2, as: OrderStatus.self),
            driverID: driver, title: row.text(4), createdAt: row.date(5), updatedAt: row.date(6), version: row.int(7),
            seen: OrderReceipt.stored(
                driverID: row.optionalInt64(8), version: row.optionalInt64(9).map(Int.init), at: row.optionalDate(10),
                assignedTo: driver))
    }

    // MARK: Reading

    func orderPage(in company: CompanyID, _ query: OrderQuery) throws -> OrderPage {
        if query.matchesNothing { return .empty }
        let windowEnd =
            query.foldedText == nil
            ? nil : try textWindowEnd(in: company, driver: query.driver, before: query.before, window: query.textWindow)
        let (sql, arguments) = Self.orderPageStatement(in: company, query, windowEnd: windowEnd, now: clock())
        let rows = try perform { () throws(SQLiteError) in
            try db.query(sql, arguments, Self.summary)
        }
        return OrderPage(fetched: rows, limit: query.limit, windowEnd: windowEnd)
    }

    /// The SQL of a list page and its arguments (`windowEnd`: a text page's scan window). The SQL
    /// text depends only on which filters are present, how many statuses, and whether the query is
    /// finished-only with a recent moment (`OrderQuery.isRecentlyFinished(now:)`): a bounded set, each cached
    /// once; lists travel as one JSON parameter.
    static func orderPageStatement(
        in company: CompanyID, _ query: OrderQuery, windowEnd: OrderID?, now: Date
    ) -> (sql: String, arguments: [SQLiteValue]) {
        var filters = ""
        var filterArguments: [SQLiteValue] = []
        if let driver = query.driver {
            filters += " AND driver_id = ?"
            filterArguments.append(.id(driver))
        }
        if let ids = query.ids {
            filters += " AND id IN (SELECT value FROM json_each(?))"
            filterArguments.append(.ids(ids))
        }
        if let folded = query.foldedText {
            // `waybill_lower` is Swift's `lowercased()` (SQLiteConnection): LIKE would fold ASCII only.
            filters += " AND (instr(waybill_lower(number), ?) > 0 OR instr(waybill_lower(title), ?) > 0)"
            filterArguments += [.text(folded), .text(folded)]
        }
        if let after = query.updatedAfter {
            filters += " AND updated_at > ?"
            filterArguments.append(.date(after))
            // The recent half of a driver's list: a range of `orders_finished_by_driver`.
            if query.isRecentlyFinished(now: now) { filters += " AND " + OrderQuery.finishedOnlyClause }
        }
        if let before = query.before {
            filters += " AND id < ?"
            filterArguments.append(.id(before))
        }
        if let windowEnd {
            filters += " AND id >= ?"
            filterArguments.append(.id(windowEnd))
        }
        let fetch = SQLiteValue.int(query.limit + 1)
        if let statuses = query.allowedStatuses {
            // One newest-first range of (company_id, status, id) per status, merged: SQLite cannot
            // walk several index ranges in id order at once, and `status IN (…)` would either
            // sort every row of those statuses or scan the whole company by id.
            let branch =
                "SELECT * FROM (SELECT \(Self.summaryColumns) FROM orders WHERE company_id = ? AND status = ?"
                + filters + " ORDER BY id DESC LIMIT ?)"
            let sql = Array(repeating: branch, count: statuses.count).joined(separator: " UNION ALL ")
                + " ORDER BY id DESC LIMIT ?"
            return (sql, statuses.flatMap { [.id(company), .text($0.rawValue)] + filterArguments + [fetch] } + [fetch])
        }
        // (company_id, id), or (company_id, driver_id, id) with a driver.
        let sql = "SELECT \(Self.summaryColumns) FROM orders WHERE company_id = ?" + filters + " ORDER BY id DESC LIMIT ?"
        return (sql, [.id(company)] + filterArguments + [fetch])
    }

    /// The last id of a text page's scan window (the `window`-th order below `before`), if the
    /// company has that many: one covering walk of (company_id, id), or of (company_id, driver_id,
    /// id) for a driver. Counted among the driver's own orders: the window's end becomes the page's
    /// `next` cursor, and another driver's order id must not (a review found a driver's search
    /// walking the company's ids that way).
    private func textWindowEnd(in company: CompanyID, driver: UserID?, before: OrderID?, window: Int) throws -> OrderID? {
        let sql =
            "SELECT id FROM orders WHERE company_id = ?" + (driver == nil ? "" : " AND driver_id = ?")
            + (before == nil ? "" : " AND id < ?") + " ORDER BY id DESC LIMIT 1 OFFSET ?"
        let arguments: [SQLiteValue] =
            [.id(company)] + (driver.map { [.id($0)] } ?? []) + (before.map { [.id($0)] } ?? [])
            + [.int(max(0, window - 1))]
        return try perform { () throws(SQLiteError) in
            try db.queryFirst(sql, arguments) { OrderID($0.int64(0)) }
        }
    }

    /// From `order_counts` (migration 0016), which triggers keep: one short range, not a walk of
    /// the company's orders. Driver 0 holds the company's totals (ids start at 1).
    func orderCounts(in company: CompanyID, driver: UserID?) throws -> [OrderStatus: Int] {
        let sql = "SELECT status, n FROM order_counts WHERE company_id = ? AND driver_id = ? AND n <> 0"
        let arguments: [SQLiteValue] = [.id(company), driver.map { .id($0) } ?? .int(0)]
        let pairs = try perform { () throws(SQLiteError) in
            try db.query(sql, arguments) { row throws(SQLiteError) in
                (try row.enumValue(0, as: OrderStatus.self), row.int(1))
            }
        }
        return Dictionary(pairs, uniquingKeysWith: +)
    }

    func order(_ id: OrderID, in company: CompanyID) throws -> Order? {
        try perform { () throws(SQLiteError) in try loadOrder(id, in: company) }
    }

    /// The order with its stages and documents as stored; `stages` and `documents`, when given,
    /// are used instead of reading them (the caller knows them to be the stored rows).
    func loadOrder(
        _ id: OrderID, in company: CompanyID, stages: [Stage]? = nil, documents: [Document]? = nil
    ) throws(SQLiteError) -> Order? {
        if stages == nil, documents == nil, !partsChanged.contains(id), let writes = db.orderRowWrites,
            writes.last(of: id) == 0, let row = db.orderParts?.row(of: id, in: company)
        {
            // No statement has changed the row since this connection committed or read it
            // (`OrderPartsCache`): the order as stored, without a statement.
            loadedReceipts[id] = row.receipt
            loaded[id] = row.order
            return row.order
        }
        let found = try db.queryFirst(
            """
            SELECT id, company_id, number, status, driver_id, title, notes, created_at, updated_at, version,
                seen_driver_id, seen_version, seen_at
            FROM orders WHERE id = ? AND company_id = ?
            """,
            [.id(id), .id(company)]
        ) { row throws(SQLiteError) in
            let driver = row.optionalInt64(4).map(UserID.init)
            let receipt = OrderReceipt.Columns(
                driverID: row.optionalInt64(10), version: row.optionalInt64(11).map(Int.init), at: row.optionalDate(12))
            let order = Order(
                id: OrderID(row.int64(0)), companyID: CompanyID(row.int64(1)), number: row.text(2),
                status: try row.enumValue(3, as: OrderStatus.self), driverID: driver,
                title: row.text(5), notes: row.text(6), createdAt: row.date(7), updatedAt: row.date(8),
                version: row.int(9),
                seen: receipt.receipt(assignedTo: driver))
            return (order, receipt)
        }
        guard let found else { return nil }
        var order = found.0
        loadedReceipts[id] = found.1
        if stages == nil, documents == nil, !partsChanged.contains(id),
            let parts = db.orderParts?.parts(of: id, at: order.version)
        {
            // The row's version names the parts: committed once, never changed since (`OrderPartsCache`).
            order.stages = parts.stages
            order.documents = parts.documents
            loaded[id] = order
            keepRow(order, receipt: found.1, id: id)
            return order
        }
        if let stages {
            order.stages = stages
        } else {
            order.stages = try db.query(
                """
                SELECT id, position, kind, address, planned_at, completed_at
                FROM stages WHERE order_id = ? ORDER BY position, id
                """,
                [.id(id)]
            ) { row throws(SQLiteError) in
                Stage(
                    id: StageID(row.int64(0)), position: row.int(1), kind: try row.enumValue(2, as: StageKind.self),
                    address: row.text(3), plannedAt: row.optionalDate(4), completedAt: row.optionalDate(5))
            }
        }
        if let documents {
            order.documents = documents
        } else {
            order.documents = try db.query(
                "SELECT id, name, kind, created_at FROM documents WHERE order_id = ? ORDER BY id", [.id(id)]
            ) { Document(id: DocumentID($0.int64(0)), name: $0.text(1), kind: $0.text(2), createdAt: $0.date(3)) }
        }
        if stages == nil, documents == nil {
            keepParts(of: order, id: id)
            keepRow(order, receipt: found.1, id: id)
        }
        loaded[id] = order
        return order
    }

    // MARK: Writing

    func nextOrderSequence(company: CompanyID, year: Int, month: Int) throws -> Int {
        try perform { () throws(SQLiteError) in
            let last = try db.queryFirst(
                """
                INSERT INTO order_sequences (company_id, year, month, last) VALUES (?, ?, ?, 1)
                ON CONFLICT (company_id, year, month) DO UPDATE SET last = last + 1
                RETURNING last
                """,
                [.id(company), .int(year), .int(month)]
            ) { $0.int(0) }
            return try required(last, "order_sequences")
        }
    }

    func insertOrder(_ order: Order) throws -> Order {
        try perform { () throws(SQLiteError) in
            let id = OrderID(
                try required(
                    try db.queryFirst(
                        """
                        INSERT INTO orders
                            (company_id, number, status, driver_id, title, notes, created_at, updated_at, version)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id
                        """,
                        [
                            .id(order.companyID), .text(order.number), .text(order.status.rawValue),
                            .id(order.driverID),
                            .text(order.title), .text(order.notes), .date(order.createdAt), .date(order.updatedAt),
                            .int(order.version),
                        ]
                    ) { $0.int64(0) }, "orders"))
            // Built from the input rather than read back (the hot path), with dates as stored.
            var stored = order
            stored.id = id
            stored.createdAt = order.createdAt.sqliteRoundTripped
            stored.updatedAt = order.updatedAt.sqliteRoundTripped
            stored.stages = try order.stages.map { stage throws(SQLiteError) in try insertStage(stage, of: id) }
            stored.documents = try order.documents.map { document throws(SQLiteError) in
                try insertDocument(document, of: id)
            }
            return stored
        }
    }

    func deleteOrder(_ id: OrderID, in company: CompanyID) throws {
        let deleted = try perform { () throws(SQLiteError) -> Bool in
            // Stages and documents go with it (ON DELETE CASCADE); its events stay in the outbox.
            partsChanged.insert(id)
            loaded[id] = nil
            loadedReceipts[id] = nil
            try db.execute("DELETE FROM orders WHERE id = ? AND company_id = ?", [.id(id), .id(company)])
            return db.changes > 0
        }
        if !deleted { throw StoreError.notFound }
    }

    // MARK: Stages and documents

    func insertStage(_ stage: Stage, of order: OrderID) throws(SQLiteError) -> Stage {
        let id = try db.queryFirst(
            """
            INSERT INTO stages (order_id, position, kind, address, planned_at, completed_at)
            VALUES (?, ?, ?, ?, ?, ?) RETURNING id
            """,
            [
                .id(order), .int(stage.position), .text(stage.kind.rawValue), .text(stage.address),
                .date(stage.plannedAt), .date(stage.completedAt),
            ]
        ) { StageID($0.int64(0)) }
        var stored = stage
        stored.id = try required(id, "stages")
        stored.plannedAt = stage.plannedAt?.sqliteRoundTripped
        stored.completedAt = stage.completedAt?.sqliteRoundTripped
        return stored
    }

    func insertDocument(_ document: Document, of order: OrderID) throws(SQLiteError) -> Document {
        let id = try db.queryFirst(
            "INSERT INTO documents (order_id, name, kind, created_at) VALUES (?, ?, ?, ?) RETURNING id",
            [.id(order), .text(document.name), .text(document.kind), .date(document.createdAt)]
        ) { DocumentID($0.int64(0)) }
        var stored = document
        stored.id = try required(id, "documents")
        stored.createdAt = document.createdAt.sqliteRoundTripped
        return stored
    }
}

/// The row an `INSERT … RETURNING` must have produced.
func required<T>(_ value: T?, _ table: String) throws(SQLiteError) -> T {
    guard let value else {
        throw SQLiteError(code: SQLITE_INTERNAL, message: "no row returned by an insert into \(table)")
    }
    return value
}
