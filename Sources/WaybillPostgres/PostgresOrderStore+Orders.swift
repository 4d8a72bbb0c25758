import Foundation
import WaybillDomain
import WaybillStorage

/// Orders with their stages and documents, and the per-company order number sequences.
extension PostgresOrderStore.Transaction {
    static let summaryColumns =
        "id, number, status, driver_id, title, created_at, updated_at, version, seen_driver_id, seen_version, seen_at"

    /// A row of `summaryColumns`.
    static func summary(_ row: PostgresRow) throws(PostgresError) -> OrderSummary {
        let driver = try row.optionalInt64(3).map(UserID.init)
        return OrderSummary(
            id: OrderID(try row.int64(0)), number: row.text(1), status: try row.enumValue(2, as: OrderStatus.self),
            driverID: driver, title: row.text(4), createdAt: try row.date(5), updatedAt: try row.date(6),
            version: try row.int(7),
            seen: OrderReceipt.stored(
                driverID: try row.optionalInt64(8), version: try row.optionalInt64(9).map(Int.init),
                at: try row.optionalDate(10), assignedTo: driver))
    }

    // MARK: Reading

    func orderPage(in company: CompanyID, _ query: OrderQuery) throws -> OrderPage {
        if query.matchesNothing { return .empty }
        let windowEnd =
            query.foldedText == nil
            ? nil : try textWindowEnd(in: company, driver: query.driver, before: query.before, window: query.textWindow)
        let (sql, arguments) = Self.orderPageStatement(in: company, query, windowEnd: windowEnd, now: clock())
        let rows = try perform { () throws(PostgresError) in
            try self.query(sql, arguments, Self.summary)
        }
        return OrderPage(fetched: rows, limit: query.limit, windowEnd: windowEnd)
    }

    /// The SQL of a list page and its arguments (`windowEnd`: a text page's scan window). The SQL
    /// text depends only on which filters are present and whether the query is finished-only with
    /// a recent moment (`OrderQuery.isRecentlyFinished(now:)`): at most 128 prepared statements per shape; lists
    /// travel as one array parameter.
    static func orderPageStatement(
        in company: CompanyID, _ query: OrderQuery, windowEnd: OrderID?, now: Date
    ) -> (sql: String, arguments: [PostgresValue]) {
        var arguments: [PostgresValue] = [.id(company)]
        var filters = ""
        if let driver = query.driver {
            arguments.append(.id(driver))
            filters += " AND driver_id = $\(arguments.count)"
        }
        if let ids = query.ids {
            arguments.append(.text(PostgresArray.literal(ids.map { String($0.rawValue) })))
            filters += " AND id = ANY($\(arguments.count)::bigint[])"
        }
        if let folded = query.foldedText {
            // `waybill_search` is ICU's root locale (migration 0007): lower() folds every script the
            // same way on any database, as the SQLite store's `waybill_lower` does; ILIKE would
            // follow the database's locale (ASCII only under "C").
            arguments.append(.text(folded))
            filters +=
                " AND (strpos(translate(lower(number COLLATE waybill_search), 'ς', 'σ'), $\(arguments.count)) > 0"
                + " OR strpos(translate(lower(title COLLATE waybill_search), 'ς', 'σ'), $\(arguments.count)) > 0)"
        }
        if let after = query.updatedAfter {
            arguments.append(.date(after))
            filters += " AND updated_at > $\(arguments.count)"
            // The recent half of a driver's list: a range of `orders_finished_by_driver`.
            if query.isRecentlyFinished(now: now) { filters += " AND " + OrderQuery.finishedOnlyClause }
        }
        if let before = query.before {
            arguments.append(.id(before))
            filters += " AND id < $\(arguments.count)"
        }
        if let windowEnd {
            arguments.append(.id(windowEnd))
            filters += " AND id >= $\(arguments.count)"
        }
        arguments.append(.int(query.limit + 1))
        let limit = "$\(arguments.count)"
        let sql: String
        if let statuses = query.allowedStatuses {
            // One newest-first range of (company_id, status, id) per status, merged: a plain
            // `status = ANY(…) ORDER BY id` would sort every row of those statuses, or walk the
            // company's whole history by id when few rows match.
            arguments.append(.text(PostgresArray.literal(statuses.map(\.rawValue))))
            sql = """
                SELECT o.* FROM unnest($\(arguments.count)::text[]) AS wanted(status)
                CROSS JOIN LATERAL (
                    SELECT \(Self.summaryColumns) FROM orders
                    WHERE company_id = $1 AND orders.status = wanted.status\(filters)
                    ORDER BY id DESC LIMIT \(limit)
                ) AS o
                ORDER BY o.id DESC LIMIT \(limit)
                """
        } else {
            sql = "SELECT \(Self.summaryColumns) FROM orders WHERE company_id = $1\(filters) ORDER BY id DESC LIMIT \(limit)"
        }
        return (sql, arguments)
    }

    /// The last id of a text page's scan window (the `window`-th order below `before`), if the
    /// company has that many: one index-only walk of (company_id, id), or of (company_id, driver_id,
    /// id) for a driver. Counted among the driver's own orders: the window's end becomes the page's
    /// `next` cursor, and another driver's order id must not (a review found a driver's search
    /// walking the company's ids that way).
    private func textWindowEnd(in company: CompanyID, driver: UserID?, before: OrderID?, window: Int) throws -> OrderID? {
        var arguments: [PostgresValue] = [.id(company)]
        var sql = "SELECT id FROM orders WHERE company_id = $1"
        if let driver {
            arguments.append(.id(driver))
            sql += " AND driver_id = $\(arguments.count)"
        }
        if let before {
            arguments.append(.id(before))
            sql += " AND id < $\(arguments.count)"
        }
        arguments.append(.int(max(0, window - 1)))
        sql += " ORDER BY id DESC LIMIT 1 OFFSET $\(arguments.count)"
        return try perform { () throws(PostgresError) in
            try queryFirst(sql, arguments) { row throws(PostgresError) in OrderID(try row.int64(0)) }
        }
    }

    /// From `order_counts` (migration 0016), which a trigger keeps; driver 0 holds the company's totals.
    func orderCounts(in company: CompanyID, driver: UserID?) throws -> [OrderStatus: Int] {
        let sql = "SELECT status, n FROM order_counts WHERE company_id = $1 AND driver_id = $2 AND n <> 0"
        let arguments: [PostgresValue] = [.id(company), driver.map { .id($0) } ?? .int(0)]
        let pairs = try perform { () throws(PostgresError) in
            try query(sql, arguments) { row throws(PostgresError) in
                (try row.enumValue(0, as: OrderStatus.self), try row.int(1))
            }
        }
        return Dictionary(pairs, uniquingKeysWith: +)
    }

    /// Locks the rows of the orders `turns` (`FOR UPDATE`) one at a time, in the given order, each
    /// waiting as long as the transaction's lock wait allows, and tells `locked` of each: a paused
    /// order's probe (`PostgresOrderStore.write(changing:…)`). One statement per row, so a lock
    /// timeout names its row (probes are rare: a round trip each does not matter). A row of
    /// another company than the turn's is not locked: the caller's transaction
    /// does not find it either.
    func lockOrders(_ turns: [OrderTurn], locked: (OrderTurn) -> Void) throws {
        for turn in turns {
            try perform { () throws(PostgresError) in
                _ = try run([
                    PostgresStatement(
                        "SELECT id FROM orders WHERE id = $1 AND company_id = $2 FOR UPDATE",
                        [.integer(turn.order), .integer(turn.company)])
                ])
            }
            locked(turn)
        }
    }

    /// In a write transaction the order row is locked (`FOR UPDATE`) until the transaction ends,
    /// so a read-modify-write of one order by two nodes (or two writer threads) serializes: the
    /// second waits, then reads the first one's result instead of overwriting it.
    func order(_ id: OrderID, in company: CompanyID) throws -> Order? {
        try perform { () throws(PostgresError) in try loadOrder(id, in: company, lock: isWriter) }
    }

    private func loadOrder(_ id: OrderID, in company: CompanyID, lock: Bool) throws(PostgresError) -> Order? {
        // The row, its stages and its documents in one round trip (a pipeline). Those of an order
        // that is not this company's are read with it, and dropped unseen.
        let results = try run([
            PostgresStatement(
                """
                SELECT id, company_id, number, status, driver_id, title, notes, created_at, updated_at, version,
                    seen_driver_id, seen_version, seen_at
                FROM orders WHERE id = $1 AND company_id = $2\(lock ? " FOR UPDATE" : "")
                """,
                [.id(id), .id(company)]),
            PostgresStatement(
                """
                SELECT id, position, kind, address, planned_at, completed_at
                FROM stages WHERE order_id = $1 ORDER BY position, id
                """,
                [.id(id)]),
            PostgresStatement(
                "SELECT id, name, kind, created_at FROM documents WHERE order_id = $1 ORDER BY id", [.id(id)]),
        ])
        let found = try results[0].rows { row throws(PostgresError) in
            let driver = try row.optionalInt64(4).map(UserID.init)
            let receipt = OrderReceipt.Columns(
                driverID: try row.optionalInt64(10), version: try row.optionalInt64(11).map(Int.init),
                at: try row.optionalDate(12))
            let order = Order(
                id: OrderID(try row.int64(0)), companyID: CompanyID(try row.int64(1)), number: row.text(2),
                status: try row.enumValue(3, as: OrderStatus.self), driverID: driver, title: row.text(5),
                notes: row.text(6), createdAt: try row.date(7), updatedAt: try row.date(8), version: try row.int(9),
                seen: receipt.receipt(assignedTo: driver))
            return (order, receipt)
        }.first
        guard let found else { return nil }
        var order = found.0
        let receipt = found.1
        order.stages = try results[1].rows { row throws(PostgresError) in
            Stage(
                id: StageID(try row.int64(0)), position: try row.int(1), kind: try row.enumValue(2, as: StageKind.self),
                address: row.text(3), plannedAt: try row.optionalDate(4), completedAt: try row.optionalDate(5))
        }
        order.documents = try results[2].rows { row throws(PostgresError) in
            Document(id: DocumentID(try row.int64(0)), name: row.text(1), kind: row.text(2), createdAt: try row.date(3))
        }
        if lock {
            // Locked (FOR UPDATE) until the transaction ends: nothing else can change it meanwhile.
            loaded[id] = order
            loadedReceipts[id] = receipt
        }
        return order
    }

    // MARK: Writing

    func nextOrderSequence(company: CompanyID, year: Int, month: Int) throws -> Int {
        try perform(savepoint: true) { () throws(PostgresError) in
            let last = try queryFirst(
                """
                INSERT INTO order_sequences AS s (company_id, year, month, last) VALUES ($1, $2, $3, 1)
                ON CONFLICT (company_id, year, month) DO UPDATE SET last = s.last + 1
                RETURNING last
                """,
                [.id(company), .int(year), .int(month)]
            ) { row throws(PostgresError) in try row.int(0) }
            return try required(last, "order_sequences")
        }
    }

    func insertOrder(_ order: Order) throws -> Order {
        try perform(savepoint: true) { () throws(PostgresError) in
            let id = OrderID(
                try required(
                    try queryFirst(
                        """
                        INSERT INTO orders
                            (company_id, number, status, driver_id, title, notes, created_at, updated_at, version)
                        VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id
                        """,
                        [
                            .id(order.companyID), .text(order.number), .text(order.status.rawValue),
                            .id(order.driverID), .text(order.title), .text(order.notes), .date(order.createdAt),
                            .date(order.updatedAt), .int(order.version),
                        ]
                    ) { row throws(PostgresError) in try row.int64(0) }, "orders"))
            // Built from the input rather than read back (the hot path), with dates as stored.
            var stored = order
            stored.id = id
            stored.createdAt = order.createdAt.postgresRoundTripped
            stored.updatedAt = order.updatedAt.postgresRoundTripped
            stored.stages = try order.stages.map { stage throws(PostgresError) in try insertStage(stage, of: id) }
            stored.documents = try order.documents.map { document throws(PostgresError) in
                try insertDocument(document, of: id)
            }
            return stored
        }
    }

    /// Writes the order's row in one statement, and its stages and documents only where they
    /// changed, comparing with the order as this transaction read it under its row lock; when only
    /// the row changed, the answer is built from that read instead of reading it all back. A
    /// savepoint (two more round trips) only when the number changes, the column a unique rule can
    /// refuse so that a closure may catch the conflict and carry on. (A driver id breaking its
    /// foreign key still fails the write with `conflict`, as with a savepoint, but dooms the rest of
    /// the transaction; the order service reads the driver in the same transaction first, and users
    /// are never deleted.) The usual write (a status) is then one statement where it was about ten
    /// (docs/BENCHMARKS.md, "Fewer round trips per write").
    func updateOrder(_ order: Order) throws -> Order {
        guard let id = order.id else { throw StoreError.notFound }
        // Forgotten until the answer is known: a statement below that fails must not leave a stale
        // `before` for a later update in this transaction (the closure may catch the error).
        let cached = loaded.removeValue(forKey: id), cachedReceipt = loadedReceipts.removeValue(forKey: id)
        let mayBreakARule = cached.map { $0.number != order.number } ?? true
        let stored = try perform(savepoint: mayBreakARule) { () throws(PostgresError) -> Order? in
            var before = cached, receipt = cachedReceipt
            if before == nil {
                before = try loadOrder(id, in: order.companyID, lock: true)
                receipt = loadedReceipts.removeValue(forKey: id)
                loaded[id] = nil
            }
            guard let before, let receipt, before.companyID == order.companyID else { return nil }
            let update = PostgresStatement(
                """
                UPDATE orders SET number = $1, status = $2, driver_id = $3, title = $4, notes = $5, created_at = $6,
                    updated_at = $7, version = $8
                WHERE id = $9 AND company_id = $10
                """,
                [
                    .text(order.number), .text(order.status.rawValue), .id(order.driverID), .text(order.title),
                    .text(order.notes), .date(order.createdAt), .date(order.updatedAt), .int(order.version), .id(id),
                    .id(order.companyID),
                ])
            if cached != nil && !mayBreakARule {
                // The row is there and locked by this transaction (read FOR UPDATE), so the UPDATE
                // changes it: it goes out with the next statement (the event append, usually),
                // and a failure (a driver id breaking its foreign key) fails that statement.
                deferWrite(update)
            } else {
                guard try run([update])[0].affectedRows > 0 else { return nil }
            }
            let stagesWritten = try syncStages(order.stages, of: id, existing: before.stages)
            var documentsWritten = false
            for document in order.documents where document.id == nil {
                _ = try insertDocument(document, of: id)
                documentsWritten = true
            }
            guard !stagesWritten, !documentsWritten else {
                // New ids, or rows deleted: read back as stored (and remembered for a later update).
                return try loadOrder(id, in: order.companyID, lock: true)
            }
            // Only the row changed: the order as the UPDATE left it, dates as stored.
            var after = before
            after.number = order.number
            after.status = order.status
            after.driverID = order.driverID
            after.title = order.title
            after.notes = order.notes
            after.createdAt = order.createdAt.postgresRoundTripped
            after.updatedAt = order.updatedAt.postgresRoundTripped
            after.version = order.version
            after.seen = receipt.receipt(assignedTo: after.driverID)
            loaded[id] = after
            loadedReceipts[id] = receipt
            return after
        }
        guard let stored else { throw StoreError.notFound }
        return stored
    }

    func deleteOrder(_ id: OrderID, in company: CompanyID) throws {
        loaded[id] = nil
        loadedReceipts[id] = nil
        let deleted = try perform { () throws(PostgresError) -> Bool in
            // Stages and documents go with it (ON DELETE CASCADE); its events stay in the outbox.
            try execute("DELETE FROM orders WHERE id = $1 AND company_id = $2", [.id(id), .id(company)]).affectedRows
                > 0
        }
        if !deleted { throw StoreError.notFound }
    }

    // MARK: Stages and documents

    /// Listed stages with an id of this order are updated (only when they changed), the others
    /// inserted; unlisted ones deleted. `existing` are the order's stages as stored (read under the
    /// row lock). Returns whether it wrote anything.
    private func syncStages(_ stages: [Stage], of order: OrderID, existing: [Stage]) throws(PostgresError) -> Bool {
        // The usual write (a status, a driver, the notes) leaves the stages as read.
        if stages == existing { return false }
        var written = false
        var stored: [Int64: Stage] = [:]
        for stage in existing { if let id = stage.id?.rawValue { stored[id] = stage } }
        var kept: Set<Int64> = []
        for stage in stages {
            // An id from another order is treated as new: a write never touches another order's rows.
            if let id = stage.id?.rawValue, let current = stored[id] {
                kept.insert(id)
                let same =
                    stage.position == current.position && stage.kind == current.kind && stage.address == current.address
                    && stage.plannedAt?.epochMilliseconds == current.plannedAt?.epochMilliseconds
                    && stage.completedAt?.epochMilliseconds == current.completedAt?.epochMilliseconds
                guard !same else { continue }
                written = true
                _ = try execute(
                    """
                    UPDATE stages SET position = $1, kind = $2, address = $3, planned_at = $4, completed_at = $5
                    WHERE id = $6 AND order_id = $7
                    """,
                    [
                        .int(stage.position), .text(stage.kind.rawValue), .text(stage.address), .date(stage.plannedAt),
                        .date(stage.completedAt), .integer(id), .id(order),
                    ])
            } else {
                _ = try insertStage(stage, of: order)
                written = true
            }
        }
        for id in stored.keys where !kept.contains(id) {
            _ = try execute("DELETE FROM stages WHERE id = $1", [.integer(id)])
            written = true
        }
        return written
    }

    private func insertStage(_ stage: Stage, of order: OrderID) throws(PostgresError) -> Stage {
        let id = try queryFirst(
            """
            INSERT INTO stages (order_id, position, kind, address, planned_at, completed_at)
            VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
            """,
            [
                .id(order), .int(stage.position), .text(stage.kind.rawValue), .text(stage.address),
                .date(stage.plannedAt), .date(stage.completedAt),
            ]
        ) { row throws(PostgresError) in StageID(try row.int64(0)) }
        var stored = stage
        stored.id = try required(id, "stages")
        stored.plannedAt = stage.plannedAt?.postgresRoundTripped
        stored.completedAt = stage.completedAt?.postgresRoundTripped
        return stored
    }

    private func insertDocument(_ document: Document, of order: OrderID) throws(PostgresError) -> Document {
        let id = try queryFirst(
            "INSERT INTO documents (order_id, name, kind, created_at) VALUES ($1, $2, $3, $4) RETURNING id",
            [.id(order), .text(document.name), .text(document.kind), .date(document.createdAt)]
        ) { row throws(PostgresError) in DocumentID(try row.int64(0)) }
        var stored = document
        stored.id = try required(id, "documents")
        stored.createdAt = document.createdAt.postgresRoundTripped
        return stored
    }
}
