import Foundation
import WaybillDomain
import WaybillStorage

/// The transactional outbox: events committed with the writes that caused them, read back by
/// group (WebSocket resume) or in full (the relay), pruned once relayed and old.
extension SQLiteOrderStore.Transaction {
    private static let eventColumns = """
        e.event_id, e.company_id, e.type, e.order_id, e.number, e.old_status, e.new_status, e.driver_id,
        e.old_driver_id, e.groups, e.changed_at, e.committed_at, e.seen_version, e.cursor_salt
        """

    private static func decodeEvent(_ row: SQLiteRow) throws(SQLiteError) -> StoredEvent {
        let oldStatus = try row.optionalText(5).map { _ throws(SQLiteError) in
            try row.enumValue(5, as: OrderStatus.self)
        }
        let event = OrderEvent(
            type: try row.enumValue(2, as: OrderEventType.self), companyID: CompanyID(row.int64(1)),
            orderID: OrderID(row.int64(3)), number: row.text(4), oldStatus: oldStatus,
            newStatus: try row.enumValue(6, as: OrderStatus.self), driverID: row.optionalInt64(7).map(UserID.init),
            oldDriverID: row.optionalInt64(8).map(UserID.init), changedAt: row.date(10),
            groups: row.text(9).split(separator: " ").compactMap { Group(name: String($0)) },
            seenVersion: row.optionalInt64(12).map(Int.init))
        return StoredEvent(id: EventID(row.int64(0)), event: event, committedAt: row.date(11), salt: row.int64(13))
    }

    // MARK: Reading

    func events(of group: Group, after: EventID, limit: Int) throws -> [StoredEvent] {
        guard limit > 0 else { return [] }
        // A fleet walks its company's rows, keeping the events that name it (`EventGroupRows`):
        // in SQL, so the LIMIT counts only those.
        let (rows, naming) = EventGroupRows.read(of: group, fleetRows: false)
        return try perform { () throws(SQLiteError) in
            // Driven by event_groups' (group_name, event_id) key: a range scan of this group only.
            try db.query(
                """
                SELECT \(Self.eventColumns)
                FROM event_groups g JOIN events e ON e.event_id = g.event_id
                WHERE g.group_name = ? AND g.event_id > ?\(naming == nil ? "" : " AND instr(' ' || e.groups || ' ', ?) > 0")
                ORDER BY g.event_id LIMIT ?
                """,
                [.text(rows.name), .id(after)] + (naming.map { [.text(" \($0.name) ")] } ?? []) + [.int(limit)],
                Self.decodeEvent)
        }
    }

    func events(after: EventID, limit: Int) throws -> [StoredEvent] {
        guard limit > 0 else { return [] }
        return try perform { () throws(SQLiteError) in
            try db.query(
                "SELECT \(Self.eventColumns) FROM events e WHERE e.event_id > ? ORDER BY e.event_id LIMIT ?",
                [.id(after), .int(limit)], Self.decodeEvent)
        }
    }

    func newestEventID() throws -> EventID {
        try perform { () throws(SQLiteError) in EventID(try newestID()) }
    }

    /// The highest id ever given to an event: the newest event's, or, when every event has been
    /// pruned, where pruning stopped (it deletes a prefix of the ids; migration 0006).
    private static let newestIDExpression =
        "max(coalesce((SELECT max(event_id) FROM events), 0), (SELECT pruned_through FROM outbox_state WHERE id = 1))"

    private func newestID() throws(SQLiteError) -> Int64 {
        try db.queryFirst("SELECT \(Self.newestIDExpression)") { $0.int64(0) } ?? 0
    }

    func prunedThrough() throws -> EventID {
        try perform { () throws(SQLiteError) in EventID(try outboxState().pruned) }
    }

    func relayedThrough() throws -> EventID {
        try perform { () throws(SQLiteError) in EventID(try outboxState().relayed) }
    }

    func oldestUnrelayedEventTime() throws -> Date? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst(
                """
                SELECT committed_at FROM events
                WHERE event_id > (SELECT relayed_through FROM outbox_state WHERE id = 1)
                ORDER BY event_id LIMIT 1
                """
            ) { $0.date(0) }
        }
    }

    func event(_ id: EventID) throws -> StoredEvent? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst("SELECT \(Self.eventColumns) FROM events e WHERE e.event_id = ?", [.id(id)], Self.decodeEvent)
        }
    }

    private func outboxState() throws(SQLiteError) -> (relayed: Int64, pruned: Int64) {
        try db.queryFirst("SELECT relayed_through, pruned_through FROM outbox_state WHERE id = 1") {
            (relayed: $0.int64(0), pruned: $0.int64(1))
        } ?? (0, 0)
    }

    // MARK: Writing

    /// Appends `events` to the outbox, numbering them on from the newest id ever given.
    ///
    /// ## Why the ids follow commit order
    /// Every write transaction begins `IMMEDIATE`, holding SQLite's one write lock until it
    /// commits, so the newest id read here cannot change under it and transactions commit in the
    /// order they took ids (within a group-commit batch, closures run one after another and
    /// commit together; a closure that throws rolls its events back with its savepoint, and the
    /// next one reuses the ids: no gap). The id is read, not kept in a counter row: that row was
    /// one more page written by every commit (migration 0006). PostgreSQL keeps its counter row,
    /// whose lock gives the same order among concurrent transactions. Resume cursors (`since=`)
    /// can therefore never skip an event that commits late.
    func appendEvents(_ events: [OrderEvent]) throws -> [StoredEvent] {
        guard !events.isEmpty else { return [] }
        let rows = try EventGroupRows.rows(for: events, fleetRows: false)
        return try perform { () throws(SQLiteError) in
            let newest: Int64
            if let known = db.newestEvent.newest(version: db.dataVersion) {
                newest = known
            } else {
                newest = try newestID()
                db.newestEvent.lookedUp()
            }
            db.newestEvent.appending()
            let committedAt = clock()
            var stored: [StoredEvent] = []
            stored.reserveCapacity(events.count)
            do throws(SQLiteError) {
                for (offset, event) in events.enumerated() {
                    let id = EventID(newest + 1 + Int64(offset)), salt = StoredEvent.newSalt()
                    try insert(event, rows: rows[offset], id: id, committedAt: committedAt, salt: salt)
                    var saved = event
                    saved.changedAt = event.changedAt.sqliteRoundTripped
                    stored.append(StoredEvent(id: id, event: saved, committedAt: committedAt.sqliteRoundTripped, salt: salt))
                }
            } catch {
                db.newestEvent.forget()
                throw error
            }
            // The usual transaction appends once: then the array is taken as it is, not copied.
            if appended.isEmpty { appended = stored } else { appended += stored }
            return stored
        }
    }

    /// Inserts `event` with its index rows for the groups `rows` (`EventGroupRows.rows(for:)`).
    private func insert(
        _ event: OrderEvent, rows groups: [Group], id: EventID, committedAt: Date, salt: Int64
    ) throws(SQLiteError) {
        try db.execute(
            """
            INSERT INTO events (event_id, company_id, type, order_id, number, old_status, new_status, driver_id,
                old_driver_id, groups, changed_at, committed_at, seen_version, cursor_salt)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            [
                .id(id), .id(event.companyID), .text(event.type.rawValue), .id(event.orderID), .text(event.number),
                .optionalText(event.oldStatus?.rawValue), .text(event.newStatus.rawValue), .id(event.driverID),
                .id(event.oldDriverID), .text(Self.groupNames(event.groups)),
                .date(event.changedAt), .date(committedAt), event.seenVersion.map(SQLiteValue.int) ?? .null,
                .integer(salt),
            ])
        // One statement for all of the event's rows (one or two: a fleet has its company's,
        // `EventGroupRows`): a statement's run costs more than its rows. OR IGNORE: a group listed
        // twice is still one delivery.
        guard !groups.isEmpty else { return }
        var arguments: [SQLiteValue] = []
        arguments.reserveCapacity(groups.count * 2)
        for group in groups {
            arguments.append(.id(id))
            arguments.append(.text(group.name))
        }
        try db.execute(Self.insertGroups(count: groups.count), arguments)
    }

    /// The event's groups for its `groups` column, space-separated (`company_1 driver_7`): built
    /// in one string, without the key path `map(\.name)` applied per group and the array it made.
    static func groupNames(_ groups: [Group]) -> String {
        // Written as bytes on the stack (`Group.writeName`) and made a string once: a small one,
        // without an allocation, when it fits 15 bytes (one group).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, groups.count * (Group.longestName + 1))) { out in
            var at = 0
            for group in groups {
                if at > 0 {
                    out[at] = UInt8(ascii: " ")
                    at += 1
                }
                at = group.writeName(into: out, at: at)
            }
            return String(decoding: UnsafeBufferPointer(rebasing: out[0..<at]), as: UTF8.self)
        }
    }

    /// The statement inserting `count` group rows (texts for up to 8 are built once).
    private static func insertGroups(count: Int) -> String {
        count <= groupInserts.count ? groupInserts[count - 1] : groupInsert(count)
    }

    private static let groupInserts = (1...8).map(groupInsert)

    private static func groupInsert(_ count: Int) -> String {
        "INSERT OR IGNORE INTO event_groups (event_id, group_name) VALUES "
            + Array(repeating: "(?, ?)", count: count).joined(separator: ", ")
    }

    func markRelayed(through: EventID) throws {
        try perform { () throws(SQLiteError) in
            // Never back, and never past the newest id: a future event must not count as relayed.
            try db.execute(
                """
                UPDATE outbox_state
                SET relayed_through = max(relayed_through, min(?, \(Self.newestIDExpression)))
                WHERE id = 1
                """,
                [.id(through)])
        }
    }

    /// One group's rows of a pruned id range: a range of the primary key (tested with its query plan).
    static let deleteGroupRange = "DELETE FROM event_groups WHERE group_name = ? AND event_id > ? AND event_id <= ?"

    func pruneEvents(committedBefore cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(SQLiteError) -> Int in
            let state = try outboxState()
            // The pruned range stays a prefix of the ids: stop before the first event that is too
            // new even if a later one carries an older time (clocks step back; two processes
            // stamp their own times), so `pruned_through` means "everything up to here is gone".
            // The event before the first one kept stays too (`pruneBound`): a pong's cursor names it.
            let upper = pruneChunkEnd(pruned: state.pruned, relayed: state.relayed, newest: try newestID(), limit: limit)
            let firstKept = try db.queryFirst(
                "SELECT event_id FROM events WHERE event_id > ? AND event_id <= ? AND committed_at >= ? ORDER BY event_id LIMIT 1",
                [.integer(state.pruned), .integer(upper + 1), .date(cutoff)]
            ) { $0.int64(0) }
            let bound = pruneBound(upper: upper, firstKept: firstKept)
            guard bound > state.pruned else { return 0 }
            let range: [SQLiteValue] = [.integer(state.pruned), .integer(bound)]
            let found = try db.queryFirst(
                "SELECT count(*), max(event_id) FROM events WHERE event_id > ? AND event_id <= ?", range
            ) { (count: $0.int(0), highest: $0.optionalInt64(1)) }
            guard let found, found.count > 0, let highest = found.highest else { return 0 }
            // By the primary key, one range per group the pruned events name (there is no index by
            // event id: it cost every write a page, and only pruning used it).
            let named = try db.query("SELECT DISTINCT groups FROM events WHERE event_id > ? AND event_id <= ?", range) {
                $0.text(0)
            }
            let groups = Set(named.flatMap { $0.split(separator: " ") }).sorted()
            for group in groups { try db.execute(Self.deleteGroupRange, [.text(String(group))] + range) }
            try db.execute("DELETE FROM events WHERE event_id > ? AND event_id <= ?", range)
            try db.execute("UPDATE outbox_state SET pruned_through = ? WHERE id = 1", [.integer(highest)])
            return found.count
        }
    }
}
