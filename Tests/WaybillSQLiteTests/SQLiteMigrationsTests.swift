import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

@Suite struct SQLiteMigrationsTests {
    @Test func openingAMissingFileCreatesItsDirectoryAndTheWholeSchema() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        store.close()

        let tables = Set(try rawQuery(database.path, "SELECT name FROM sqlite_master WHERE type = 'table'"))
        for table in [
            "schema_migrations", "companies", "users", "api_tokens", "ws_tickets", "order_sequences", "orders",
            "stages", "documents", "events", "event_groups", "outbox_state", "logouts", "login_attempts",
            "idempotency_keys",
        ] {
            #expect(tables.contains(table), "missing table \(table)")
        }
        #expect(
            try rawQuery(database.path, "SELECT name FROM schema_migrations") == [
                "0001_initial_schema", "0002_shared_sessions", "0003_order_list_indexes", "0004_order_receipts",
                "0005_idempotency_keys", "0006_outbox_without_counter", "0008_session_epochs", "0009_token_expiry_index",
                "0010_driver_status_index", "0012_token_last_use", "0013_event_cursor_salt", "0014_fleet_reads_company_rows",
                "0015_finished_by_driver_index", "0016_order_counts",
            ])
        // 0006: no counter row and no by-event index; every commit wrote both.
        #expect(!tables.contains("event_counter"))
        #expect(try rawQuery(database.path, "SELECT count(*) FROM sqlite_master WHERE name = 'event_groups_by_event'") == ["0"])
        // 0003: a status page of the list is a keyset range of its own index, not a scan and sort.
        let plan = try rawQuery(
            database.path,
            "EXPLAIN QUERY PLAN SELECT id FROM orders WHERE company_id = 1 AND status = 'completed' AND id < 50 ORDER BY id DESC LIMIT 101",
            column: 3
        ).joined(separator: "\n")
        #expect(plan.contains("orders_by_status"), "\(plan)")
        #expect(!plan.contains("TEMP B-TREE"), "\(plan)")
        // 0010: a driver's status page and counts are ranges of that driver's statuses, not a walk
        // of the driver's whole history checking each row's status.
        for (what, sql) in [
            ("page", "SELECT id, title FROM orders WHERE company_id = 1 AND status = 'completed' AND driver_id = 2 AND id < 50 ORDER BY id DESC LIMIT 101"),
            ("recent half", "SELECT id, title FROM orders WHERE company_id = 1 AND status = 'cancelled' AND driver_id = 2 AND updated_at > 5 ORDER BY id DESC LIMIT 501"),
            ("counts", "SELECT status, count(*) FROM orders WHERE company_id = 1 AND driver_id = 2 GROUP BY status"),
        ] {
            let driverPlan = try rawQuery(database.path, "EXPLAIN QUERY PLAN " + sql, column: 3).joined(separator: "\n")
            #expect(driverPlan.contains("orders_by_driver_status (company_id=? AND driver_id=?"), "\(what): \(driverPlan)")
            #expect(!driverPlan.contains("TEMP B-TREE"), "\(what): \(driverPlan)")
        }
        // 0015: the recent half of a driver's list is, for each finished status, a range of the
        // driver's finished orders by update time, with the store's own SQL; not a walk of every
        // order the driver ever finished, checking each one's update time in its row.
        func finishedPlan(since: Date) throws -> String {
            let statement = SQLiteOrderStore.Transaction.orderPageStatement(
                in: CompanyID(1), OrderQuery(driver: UserID(2), statuses: [.completed, .cancelled], updatedAfter: since, limit: 500),
                windowEnd: nil, now: t0 + 86_400)
            return try rawQuery(database.path, "EXPLAIN QUERY PLAN " + statement.sql, column: 3).joined(separator: "\n")
        }
        let recentPlan = try finishedPlan(since: t0)  // a day before now
        let range = "orders_finished_by_driver (company_id=? AND driver_id=? AND status=? AND updated_at>?)"
        #expect(recentPlan.components(separatedBy: range).count == 3, "\(recentPlan)")
        // A moment further back than `OrderQuery.recentlyFinishedReach` walks by id as before: the
        // index's rows would all be sorted, many for a moment years back.
        let farPlan = try finishedPlan(since: t0 + 86_400 - OrderQuery.recentlyFinishedReach - 1)
        #expect(!farPlan.contains("orders_finished_by_driver"), "\(farPlan)")
        #expect(farPlan.contains("orders_by_driver_status"), "\(farPlan)")
        #expect(try rawQuery(database.path, "PRAGMA journal_mode") == ["wal"])
    }

    @Test func reopeningAppliesNoMigrationTwice() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        try SQLiteOrderStore(path: database.path, readerCount: 1).close()
        try SQLiteOrderStore(path: database.path, readerCount: 1).close()
        #expect(try rawQuery(database.path, "SELECT count(*) FROM schema_migrations") == ["14"])
        #expect(try rawQuery(database.path, "SELECT relayed_through || ',' || pruned_through FROM outbox_state") == ["0,0"])
    }

    @Test func onlyNewMigrationsRunAndInOrder() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let first = [
            SQLiteMigration(name: "a", sql: "CREATE TABLE t (x INTEGER)"),
            SQLiteMigration(name: "b", sql: "INSERT INTO t VALUES (1)"),
        ]
        #expect(try SQLiteMigrations.apply(first, to: db, at: t0) == ["a", "b"])
        #expect(try SQLiteMigrations.apply(first, to: db, at: t0) == [])
        let second = first + [SQLiteMigration(name: "c", sql: "INSERT INTO t VALUES (2)")]
        #expect(try SQLiteMigrations.apply(second, to: db, at: t0) == ["c"])
        #expect(try db.query("SELECT x FROM t ORDER BY rowid") { $0.int(0) } == [1, 2])
        #expect(try db.query("SELECT name FROM schema_migrations ORDER BY rowid") { $0.text(0) } == ["a", "b", "c"])
    }

    @Test func aFailingMigrationLeavesNoTrace() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let broken = [
            SQLiteMigration(name: "a", sql: "CREATE TABLE t (x INTEGER)"),
            SQLiteMigration(name: "b", sql: "INSERT INTO missing VALUES (1)"),
        ]
        #expect(throws: SQLiteError.self) { try SQLiteMigrations.apply(broken, to: db, at: t0) }
        #expect(
            try db.query("SELECT count(*) FROM sqlite_master WHERE name IN ('t', 'schema_migrations')") {
                $0.int(0)
            } == [0])
        #expect(!db.isInTransaction)
    }

    @Test func restartKeepsDataAndEventIDsContinueUpward() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        var store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let fixture = try await Fixture.seed(store)
        let (order, firstEvents) = try await store.write { tx in
            let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id))
            return (order, try tx.appendEvents([createdEvent(order), createdEvent(order)]))
        }
        store.close()

        store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { store.close() }
        let readBack = try await store.read { tx in
            (
                try tx.order(order.id!, in: fixture.acme.id), try tx.user(fixture.alice.id),
                try tx.events(after: .zero, limit: 10), try tx.newestEventID()
            )
        }
        #expect(readBack.0 == order)
        #expect(readBack.1 == fixture.alice)
        #expect(readBack.2 == firstEvents)
        #expect(readBack.3 == EventID(2))
        let next = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
        #expect(next.map(\.id) == [EventID(3)])
    }

    /// A file from before 0006: its ids go on from its counter, also when no event is left to say
    /// what the last id was.
    @Test(arguments: [([Int64](), Int64(12)), ([Int64]([1, 2, 3]), Int64(3)), ([Int64](), Int64(0))])
    func idsContinueFromTheCounterOfAFileFromBefore0006(events: [Int64], counter: Int64) async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        try SQLiteMigrations.apply(Array(SQLiteMigrations.all.prefix(5)), to: db, at: t0)
        try db.execute("UPDATE event_counter SET last_id = ?", [.integer(counter)])
        for id in events {
            try db.execute(
                """
                INSERT INTO events (event_id, company_id, type, order_id, number, new_status, groups, changed_at, committed_at)
                VALUES (?, 1, 'order_created', 1, '2026/11/0001', 'new', 'company_1', 0, 0)
                """, [.integer(id)])
        }
        db.close()

        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { store.close() }
        #expect(try await store.read { tx in try tx.newestEventID() } == EventID(counter))
        let fixture = try await Fixture.seed(store)
        let next = try await store.write { tx in
            try tx.appendEvents([createdEvent(try tx.insertOrder(sampleOrder(in: fixture.acme.id)))])
        }
        #expect(next.map(\.id) == [EventID(counter + 1)])
        // Where events remain, the pruned mark is not moved (those events are still readable).
        let pruned = try await store.read { tx in try tx.prunedThrough() }
        #expect(pruned == EventID(events.isEmpty ? counter : 0))
    }

    /// A file from before 0008: its tokens and tickets read as epoch 0, which the next logout of
    /// their user revokes; its logouts (and any written by a node of an older build still
    /// running) read as revoking every credential of their user, as logouts did before.
    @Test func tokensTicketsAndLogoutsFromBefore0008() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        try SQLiteMigrations.apply(Array(SQLiteMigrations.all.prefix(6)), to: db, at: t0)
        try db.executeScript(
            """
            INSERT INTO companies (id, name) VALUES (1, 'Acme');
            INSERT INTO users (id, company_id, role, email, email_key, name, password_hash)
            VALUES (1, 1, 'driver', 'a@example.com', 'a@example.com', 'A', 'x'),
                   (2, 1, 'driver', 'b@example.com', 'b@example.com', 'B', 'x');
            INSERT INTO api_tokens (token_hash, user_id, created_at, expires_at) VALUES (x'01', 1, 0, NULL);
            INSERT INTO ws_tickets (ticket_hash, user_id, expires_at) VALUES (x'02', 1, 9999999999999);
            INSERT INTO logouts (user_id, at) VALUES (2, 0);
            """)
        db.close()

        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { store.close() }
        let token = try await store.read { tx in try tx.user(tokenHash: [0x01], now: t0) }
        #expect(token?.user.id == UserID(1))
        #expect(token?.epoch == SessionEpoch(0))
        // A token from before 0012 counts as used at the migration (real time: SQLite's clock).
        #expect(token.map { abs($0.lastUsedAt.timeIntervalSinceNow) < 60 } == true, "\(String(describing: token?.lastUsedAt))")
        let ticket = try await store.write { tx in try tx.consumeTicket(hash: [0x02], now: t0) }
        #expect(ticket?.epoch == SessionEpoch(0))
        let logouts = try await store.read { tx in try tx.logouts(since: Date(timeIntervalSince1970: 0)) }
        #expect(logouts.map(\.epoch) == [.revokesAll])
        let logout = try await store.write { tx in try tx.revokeTokens(of: UserID(1)) }
        #expect(logout.revokes(SessionEpoch(0)))
    }

    /// 0016 counts the orders a file already holds, per company and per driver, and its triggers
    /// keep them from there; an order write that changes no status or driver does not run them.
    @Test func orderCountsStartFromTheOrdersOfAFileFromBefore0016() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        var store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let fixture = try await Fixture.seed(store)
        try await OrderCountsBackfill.writeOrders(store, fixture)
        store.close()
        // The file as 0015 left it.
        let db = try database.openRawConnection()
        try db.executeScript(
            """
            DROP TRIGGER order_counts_insert; DROP TRIGGER order_counts_delete; DROP TRIGGER order_counts_update;
            DROP TABLE order_counts; DELETE FROM schema_migrations WHERE name = '0016_order_counts';
            """)
        db.close()
        store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { store.close() }
        #expect(try await OrderCountsBackfill.counts(store, fixture) == OrderCountsBackfill.counted)
        // From there the triggers keep them. (A notes-only write runs none: `SQLiteOrderUpdateTests`
        // counts the rows it changes.)
        try await OrderCountsBackfill.writeAfter(store, fixture)
        #expect(try await OrderCountsBackfill.counts(store, fixture) == OrderCountsBackfill.kept)
        // A change by hand: Bob's new order to the other company, with a new status.
        let raw = try database.openRawConnection()
        try raw.executeScript(
            "UPDATE orders SET company_id = \(fixture.globex.id.rawValue), status = 'new' WHERE number = 'O-9'")
        raw.close()
        let (left, joined, bobs) = try await store.read { tx in
            (
                try tx.orderCounts(in: fixture.acme.id, driver: nil),
                try tx.orderCounts(in: fixture.globex.id, driver: nil),
                try tx.orderCounts(in: fixture.acme.id, driver: fixture.bob.id)
            )
        }
        #expect(left == [.completed: 5, .assigned: 4])
        #expect(joined == [.new: 1])
        #expect(bobs == [.completed: 1, .assigned: 2])
        // And back, the company alone changed.
        let again = try database.openRawConnection()
        try again.executeScript("UPDATE orders SET company_id = \(fixture.acme.id.rawValue) WHERE number = 'O-9'")
        again.close()
        let (back, gone) = try await store.read { tx in
            (try tx.orderCounts(in: fixture.acme.id, driver: nil), try tx.orderCounts(in: fixture.globex.id, driver: nil))
        }
        #expect(back == [.completed: 5, .assigned: 4, .new: 1])
        #expect(gone == [:])
    }

    /// A downgrade is refused at open, with the reason, before anything runs against a schema the
    /// build does not know.
    @Test func aFileFromANewerBuildIsRefused() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let older = [SQLiteMigration(name: "a", sql: "CREATE TABLE t (x INTEGER)")]
        let newer = older + [SQLiteMigration(name: "b", sql: "DROP TABLE t")]
        #expect(try SQLiteMigrations.apply(newer, to: db, at: t0) == ["a", "b"])
        #expect {
            try SQLiteMigrations.apply(older, to: db, at: t0)
        } throws: { error in
            "\(error)".contains("newer Waybill (migration b)")
        }
        #expect(!db.isInTransaction)
    }
}
