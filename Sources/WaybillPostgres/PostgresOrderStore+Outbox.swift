import Foundation
import WaybillDomain
import WaybillStorage

/// The transactional outbox: events committed with the writes that caused them, read back by
/// group (WebSocket resume) or in full (the relay), pruned once relayed and old.
extension PostgresOrderStore.Transaction {
    private static let eventColumns = """
        e.event_id, e.company_id, e.type, e.order_id, e.number, e.old_status, e.new_status, e.driver_id,
        e.old_driver_id, e.groups, e.changed_at, e.committed_at, e.seen_version, e.cursor_salt
        """

    private static func decodeEvent(_ row: PostgresRow) throws(PostgresError) -> StoredEvent {
        let oldStatus = try row.optionalText(5).map { _ throws(PostgresError) in
            try row.enumValue(5, as: OrderStatus.self)
        }
        let event = OrderEvent(
            type: try row.enumValue(2, as: OrderEventType.self), companyID: CompanyID(try row.int64(1)),
            orderID: OrderID(try row.int64(3)), number: row.text(4), oldStatus: oldStatus,
            newStatus: try row.enumValue(6, as: OrderStatus.self), driverID: try row.optionalInt64(7).map(UserID.init),
            oldDriverID: try row.optionalInt64(8).map(UserID.init), changedAt: try row.date(10),
            groups: row.text(9).split(separator: " ").compactMap { Group(name: String($0)) },
            seenVersion: try row.optionalInt64(12).map(Int.init))
        return StoredEvent(
            id: EventID(try row.int64(0)), event: event, committedAt: try row.date(11), salt: try row.int64(13))
    }

    // MARK: Reading

    func events(of group: Group, after: EventID, limit: Int) throws -> [StoredEvent] {
        guard limit > 0 else { return [] }
        return try perform { () throws(PostgresError) in
            // Driven by event_groups' (group_name, event_id) key: a range scan of this group only.
            try query(
                """
                SELECT \(Self.eventColumns)
                FROM event_groups g JOIN events e ON e.event_id = g.event_id
                WHERE g.group_name = $1 AND g.event_id > $2
                ORDER BY g.event_id LIMIT $3
                """,
                [.text(group.name), .id(after), .int(limit)], Self.decodeEvent)
        }
    }

    func events(after: EventID, limit: Int) throws -> [StoredEvent] {
        guard limit > 0 else { return [] }
        return try perform { () throws(PostgresError) in
            try query(
                "SELECT \(Self.eventColumns) FROM events e WHERE e.event_id > $1 ORDER BY e.event_id LIMIT $2",
                [.id(after), .int(limit)], Self.decodeEvent)
        }
    }

    func newestEventID() throws -> EventID {
        try perform { () throws(PostgresError) in EventID(try newestID()) }
    }

    /// The counter's last id (0 before any event): a plain read, never waiting for an append's lock.
    private func newestID() throws(PostgresError) -> Int64 {
        try queryFirst("SELECT last_id FROM event_counter WHERE id = 1") { row throws(PostgresError) in try row.int64(0) } ?? 0
    }

    func prunedThrough() throws -> EventID {
        try perform { () throws(PostgresError) in EventID(try outboxState(locking: false).pruned) }
    }

    func relayedThrough() throws -> EventID {
        try perform { () throws(PostgresError) in EventID(try outboxState(locking: false).relayed) }
    }

    func oldestUnrelayedEventTime() throws -> Date? {
        try perform { () throws(PostgresError) in
            try queryFirst(
                """
                SELECT committed_at FROM events
                WHERE event_id > (SELECT relayed_through FROM outbox_state WHERE id = 1)
                ORDER BY event_id LIMIT 1
                """
            ) { row throws(PostgresError) in try row.date(0) }
        }
    }

    func event(_ id: EventID) throws -> StoredEvent? {
        try perform { () throws(PostgresError) in
            try queryFirst(
                "SELECT \(Self.eventColumns) FROM events e WHERE e.event_id = $1", [.id(id)], Self.decodeEvent)
        }
    }

    private func outboxState(locking: Bool) throws(PostgresError) -> (relayed: Int64, pruned: Int64) {
        try queryFirst(
            "SELECT relayed_through, pruned_through FROM outbox_state WHERE id = 1\(locking ? " FOR UPDATE" : "")"
        ) { row throws(PostgresError) in (relayed: try row.int64(0), pruned: try row.int64(1)) } ?? (0, 0)
    }

    // MARK: Writing

    /// Appends `events` to the outbox, numbering them from the `event_counter` row (see
    /// `appendStatement` for why the ids follow commit order).
    func appendEvents(_ events: [OrderEvent]) throws -> [StoredEvent] {
        guard !events.isEmpty else { return [] }
        let rows = try EventGroupRows.rows(for: events, fleetRows: true)
        let committedAt = clock()
        return try perform { () throws(PostgresError) in
            // One statement, one round trip: the counter row is locked from here until COMMIT, and
            // every writer of every node waits for it, so nothing else may happen in between
            // (../shared/notes/postgres-redis.md §4: hold the row briefly). `appendAtCommit` does
            // better: no round trip at all between the append and the COMMIT.
            let salts = events.map { _ in StoredEvent.newSalt() }
            let result = try run([Self.appendStatement(events, rows: rows, committedAt: committedAt, salts: salts)])[0]
            return try Self.storedEvents(events, last: result, committedAt: committedAt, salts: salts)
        }
    }

    /// Events to append with the COMMIT, in one round trip (`PostgresOrderStore.write(appendingEvents:)`):
    /// the counter row is then held only while the server runs the append and the COMMIT, never
    /// while a message travels to this node and back. `nil` when there is nothing to append.
    func appendAtCommit(_ events: [OrderEvent]) throws -> PendingAppend? {
        guard !events.isEmpty else { return nil }
        let pending = PendingAppend(events: events, rows: try EventGroupRows.rows(for: events, fleetRows: true), committedAt: clock())
        finalAppend = pending
        return pending
    }

    /// Sends what is deferred, the final append (if any) and COMMIT in one round trip; nothing at
    /// all when the closure ran no statement and appends nothing (no transaction was begun).
    func commit() throws(PostgresError) {
        let commit = PostgresStatement("COMMIT")
        // Whatever may wait for a lock before the COMMIT (the append, a deferred write) is bounded
        // from what the call has left, ahead of all of it (`freshTimeouts`).
        if hasBegun && (finalAppend != nil || hasDeferredWrites), let timeouts = freshTimeouts() {
            deferFirst(timeouts)
        }
        guard let append = finalAppend else {
            if hasBegun { _ = try run([commit]) }
            return
        }
        let salts = append.events.map { _ in StoredEvent.newSalt() }
        let results = try run([
            Self.appendStatement(append.events, rows: append.rows, committedAt: append.committedAt, salts: salts), commit,
        ])
        // Committed: an answer this build cannot read must not turn the write into a failure. The
        // events then reach the sockets through the relay's poll instead of this node's own path.
        append.stored =
            (try? Self.storedEvents(append.events, last: results[0], committedAt: append.committedAt, salts: salts)) ?? []
    }

    /// The append: ids from the `event_counter` row, the events and their groups, in one statement.
    ///
    /// ## Why the ids follow commit order
    /// `UPDATE event_counter … RETURNING last_id` locks the counter row until this transaction
    /// ends, and PostgreSQL releases row locks only after the commit is visible. A later
    /// transaction therefore cannot take a higher id and be seen before this one: it waits on the
    /// row lock until this one has committed (then reads its new value) or rolled back (then
    /// reuses the same ids, leaving no hole). Callers append as the last step of their
    /// transaction, so the row is held only for the inserts and the COMMIT.
    ///
    /// `rows` are each event's index rows (`EventGroupRows`), by its place in `events`.
    private static func appendStatement(
        _ events: [OrderEvent], rows: [[Group]], committedAt: Date, salts: [Int64]
    ) -> PostgresStatement {
        let rowEvents = rows.enumerated().flatMap { place, groups in groups.map { _ in "\(place + 1)" } }
        // The CTEs that insert run even though the final SELECT does not read them.
        return PostgresStatement(
            """
            WITH counter AS (
                UPDATE event_counter SET last_id = last_id + $1 WHERE id = 1 RETURNING last_id
            ), new_events AS (
                INSERT INTO events (event_id, company_id, type, order_id, number, old_status, new_status,
                    driver_id, old_driver_id, groups, changed_at, committed_at, seen_version, cursor_salt)
                SELECT (SELECT last_id FROM counter) - $1 + e.n, e.company_id, e.type, e.order_id, e.number,
                    e.old_status, e.new_status, e.driver_id, e.old_driver_id, e.groups, e.changed_at, $12,
                    e.seen_version, e.cursor_salt
                FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::text[], $6::text[], $7::text[],
                    $8::bigint[], $9::bigint[], $10::text[], $11::bigint[], $13::bigint[], $14::bigint[])
                    WITH ORDINALITY AS e(company_id, type, order_id, number, old_status, new_status, driver_id,
                        old_driver_id, groups, changed_at, seen_version, cursor_salt, n)
                RETURNING event_id
            ), new_groups AS (
                -- DISTINCT: a group listed twice is still one delivery.
                INSERT INTO event_groups (group_name, event_id)
                SELECT DISTINCT g.name, (SELECT last_id FROM counter) - $1 + g.n
                FROM unnest($15::text[], $16::bigint[]) AS g(name, n)
                ON CONFLICT DO NOTHING
            )
            SELECT last_id FROM counter
            """,
            [
                .int(events.count),
                .text(PostgresArray.literal(events.map { "\($0.companyID.rawValue)" })),
                .text(PostgresArray.literal(events.map { $0.type.rawValue })),
                .text(PostgresArray.literal(events.map { "\($0.orderID.rawValue)" })),
                .text(PostgresArray.literal(events.map { $0.number })),
                .text(PostgresArray.literal(events.map { $0.oldStatus?.rawValue })),
                .text(PostgresArray.literal(events.map { $0.newStatus.rawValue })),
                .text(PostgresArray.literal(events.map { $0.driverID.map { "\($0.rawValue)" } })),
                .text(PostgresArray.literal(events.map { $0.oldDriverID.map { "\($0.rawValue)" } })),
                .text(PostgresArray.literal(events.map { $0.groups.map(\.name).joined(separator: " ") })),
                .text(PostgresArray.literal(events.map { "\($0.changedAt.postgresMilliseconds)" })),
                .date(committedAt),
                .text(PostgresArray.literal(events.map { $0.seenVersion.map { "\($0)" } })),
                .text(PostgresArray.literal(salts.map { "\($0)" })),
                .text(PostgresArray.literal(rows.flatMap { $0.map(\.name) })),
                .text(PostgresArray.literal(rowEvents)),
            ])
    }

    /// The events as stored, numbered up to the counter's new `last_id` (the append's one row).
    private static func storedEvents(
        _ events: [OrderEvent], last result: PostgresResult, committedAt: Date, salts: [Int64]
    ) throws(PostgresError) -> [StoredEvent] {
        let last = try required(try result.rows { row throws(PostgresError) in try row.int64(0) }.first, "event_counter")
        var stored: [StoredEvent] = []
        stored.reserveCapacity(events.count)
        for (offset, event) in events.enumerated() {
            let id = EventID(last - Int64(events.count) + 1 + Int64(offset))
            var saved = event
            saved.changedAt = event.changedAt.postgresRoundTripped
            stored.append(
                StoredEvent(id: id, event: saved, committedAt: committedAt.postgresRoundTripped, salt: salts[offset]))
        }
        return stored
    }

    func markRelayed(through: EventID) throws {
        try perform { () throws(PostgresError) in
            // Never back, and never past the newest id: a future event must not count as relayed.
            _ = try execute(
                """
                UPDATE outbox_state
                SET relayed_through = GREATEST(relayed_through, LEAST($1, (SELECT last_id FROM event_counter WHERE id = 1)))
                WHERE id = 1
                """,
                [.id(through)])
        }
    }

    func pruneEvents(committedBefore cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(PostgresError) -> Int in
            // Locked: two nodes' pruners take turns, each starting from the other's result.
            let state = try outboxState(locking: true)
            // The pruned range stays a prefix of the ids: stop before the first event that is too
            // new even if a later one carries an older time (each node stamps its own clock), so
            // `pruned_through` means "everything up to here is gone".
            // The event before the first one kept stays too (`pruneBound`): a pong's cursor names it.
            let upper = pruneChunkEnd(pruned: state.pruned, relayed: state.relayed, newest: try newestID(), limit: limit)
            let firstKept = try queryFirst(
                "SELECT event_id FROM events WHERE event_id > $1 AND event_id <= $3 AND committed_at >= $2 ORDER BY event_id LIMIT 1",
                [.integer(state.pruned), .date(cutoff), .integer(upper + 1)]
            ) { row throws(PostgresError) in try row.int64(0) }
            let bound = pruneBound(upper: upper, firstKept: firstKept)
            guard bound > state.pruned else { return 0 }
            let range: [PostgresValue] = [.integer(state.pruned), .integer(bound)]
            let found = try queryFirst(
                "SELECT count(*), max(event_id) FROM events WHERE event_id > $1 AND event_id <= $2", range
            ) { row throws(PostgresError) in (count: try row.int(0), highest: try row.optionalInt64(1)) }
            guard let found, found.count > 0, let highest = found.highest else { return 0 }
            _ = try execute("DELETE FROM event_groups WHERE event_id > $1 AND event_id <= $2", range)
            _ = try execute("DELETE FROM events WHERE event_id > $1 AND event_id <= $2", range)
            _ = try execute("UPDATE outbox_state SET pruned_through = $1 WHERE id = 1", [.integer(highest)])
            return found.count
        }
    }
}

/// Events a write appends with its COMMIT (`Transaction.appendAtCommit`), and, once committed,
/// as stored. Written by the worker that ran the transaction before the caller is resumed, read
/// by the caller after: the continuation orders the two.
final class PendingAppend: @unchecked Sendable {
    let events: [OrderEvent]
    /// Each event's index rows (`EventGroupRows`).
    let rows: [[Group]]
    let committedAt: Date
    fileprivate(set) var stored: [StoredEvent] = []

    init(events: [OrderEvent], rows: [[Group]], committedAt: Date) {
        self.events = events
        self.rows = rows
        self.committedAt = committedAt
    }
}
