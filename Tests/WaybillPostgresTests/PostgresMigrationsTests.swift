import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

@Suite(.timeLimit(.minutes(1))) struct PostgresMigrationsTests {
    @Test func storesOpeningAtTheSameInstantMigrateOnce() async throws {
        let url = try await freshDatabase()
        let stores = try await withThrowingTaskGroup(of: PostgresOrderStore.self) { group in
            for index in 0..<4 {
                group.addTask { try await openStore(url, name: "node-\(index)", writers: 1, readers: 1) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        defer { for store in stores { store.close() } }
        let recorded = try await psql("SELECT name FROM schema_migrations ORDER BY name", in: databaseName(url))
        #expect(
            recorded.split(separator: "\n") == [
                "0001_initial_schema", "0002_shared_sessions", "0003_order_list_indexes", "0004_order_receipts",
                "0005_idempotency_keys", "0007_unicode_search", "0008_session_epochs", "0009_token_expiry_index",
                "0010_driver_status_index", "0011_repair_driver_status_index", "0012_token_last_use", "0013_event_cursor_salt",
                "0015_finished_by_driver_index", "0016_order_counts",
            ])
        // 0003: each list filter has a keyset index led by company_id.
        let indexes = try await psql(
            "SELECT indexdef FROM pg_indexes WHERE tablename = 'orders' ORDER BY indexname", in: databaseName(url))
        for columns in [
            "(company_id, id)", "(company_id, status, id)", "(company_id, driver_id, id)",
            "(company_id, driver_id, status, id)",  // 0010: a driver's status pages and counts
        ] {
            #expect(indexes.contains(columns), "no index on orders \(columns)")
        }
        // 0015: the driver list's recent half, finished orders only, with the predicate the store's
        // SQL repeats word for word (`OrderQuery.finishedOnlyClause`; PostgreSQL prints `IN` as `ANY`).
        #expect(
            indexes.contains(
                "orders_finished_by_driver ON public.orders USING btree (company_id, driver_id, status, updated_at)"
                    + " WHERE (status = ANY (ARRAY['cancelled'::text, 'completed'::text]))"), "\(indexes)")
        #expect(OrderQuery.finishedOnlyClause == "status IN ('cancelled', 'completed')")
        // Every store works on the one schema.
        let companies = try await withThrowingTaskGroup(of: Company.self) { group in
            for store in stores { group.addTask { try await store.write { tx in try tx.insertCompany(name: "C") } } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(Set(companies.map(\.id)).count == 4)
    }

    @Test func reopeningAppliesNothingAndKeepsTheData() async throws {
        let url = try await freshDatabase()
        let first = try await openStore(url)
        let company = try await first.write { tx in try tx.insertCompany(name: "Acme") }
        first.close()
        let second = try await openStore(url)
        defer { second.close() }
        #expect(try await second.read { tx in try tx.company(company.id) } == company)
        let count = try await psql("SELECT count(*) FROM schema_migrations", in: databaseName(url))
        #expect(count == "14")
    }

    /// A fresh database with `Fixture`'s orders (`OrderCountsBackfill.writeOrders`), taken back to
    /// before 0016: its next open runs the migration again over orders it has not counted.
    private static func ordersFromBefore0016() async throws -> (url: String, fixture: Fixture) {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        let fixture = try await Fixture.seed(store)
        try await OrderCountsBackfill.writeOrders(store, fixture)
        store.close()
        _ = try await psql(
            """
            DROP TRIGGER order_counts_insert_delete ON orders; DROP TRIGGER order_counts_update ON orders;
            DROP FUNCTION waybill_order_counts(); DROP TABLE order_counts;
            DELETE FROM schema_migrations WHERE name = '0016_order_counts'
            """, in: databaseName(url))
        return (url, fixture)
    }

    /// 0016 counts the orders a database already holds, per company and per driver, and its
    /// trigger keeps them from there.
    @Test func orderCountsStartFromTheOrdersOfADatabaseFromBefore0016() async throws {
        let (url, fixture) = try await Self.ordersFromBefore0016()
        let store = try await openStore(url)
        defer { store.close() }
        #expect(try await OrderCountsBackfill.counts(store, fixture) == OrderCountsBackfill.counted)
        // From there the triggers keep them.
        try await OrderCountsBackfill.writeAfter(store, fixture)
        #expect(try await OrderCountsBackfill.counts(store, fixture) == OrderCountsBackfill.kept)
    }

    /// 0016 creates its triggers before it counts. A status change another node (of the release
    /// before) has uncommitted when the migration runs is then counted: the triggers' lock waits
    /// for its commit, and the count after it sees it. With the count first, the count
    /// would miss the uncommitted change and no trigger would run for it: the counts would stay one
    /// order off for good.
    @Test func aStatusChangeOpenDuringMigration0016IsCounted() async throws {
        let (url, fixture) = try await Self.ordersFromBefore0016()
        let database = databaseName(url)
        let changed = try await psql(
            "SELECT id FROM orders WHERE status = 'assigned' AND driver_id IS NOT NULL ORDER BY id LIMIT 1", in: database)
        // Another session completes that order and keeps its transaction open until a lock on
        // `orders` in this database is waited for (the migration's), then commits; after 20 s with
        // no such wait it fails, which rolls the change back and fails the checks below. A fixed
        // sleep instead let a slow runner start the migration after the commit, and then the
        // test passed whatever the migration's order (found by a review).
        async let held = psql(
            heldTransaction(
                "UPDATE orders SET status = 'completed' WHERE id = \(changed)",
                until: """
                    EXISTS (
                        SELECT 1 FROM pg_locks WHERE NOT granted AND relation = 'orders'::regclass
                        AND database = (SELECT oid FROM pg_database WHERE datname = current_database()))
                    """), in: database)
        #expect(try await aSessionSleeps(in: database))
        let store = try await openStore(url)  // migrates 0016 while the change is open
        defer { store.close() }
        _ = try await held  // throws if nothing waited for the lock
        // Every counter equals a count of the orders as they are now, company and driver rows alike.
        let wrong = try await psql(
            """
            SELECT count(*) FROM (
                SELECT company_id, coalesce(driver_id, 0) AS driver_id, status, count(*) AS n FROM orders
                GROUP BY GROUPING SETS ((company_id, status), (company_id, driver_id, status))
                HAVING GROUPING(driver_id) = 1 OR driver_id IS NOT NULL
            ) AS counted
            FULL JOIN (SELECT * FROM order_counts WHERE n <> 0) AS kept USING (company_id, driver_id, status)
            WHERE counted.n IS DISTINCT FROM kept.n
            """, in: database)
        #expect(wrong == "0", "counters that differ from the orders")
        #expect(try await OrderCountsBackfill.counts(store, fixture).company == [.completed: 5, .assigned: 4])
    }

    /// A database a newer release migrated is refused at open, with the migration it does not know
    /// (a rollback, or an old node restarted mid-upgrade, started and then failed its writes).
    @Test func aDatabaseFromANewerReleaseIsRefusedAtOpen() async throws {
        let url = try await freshDatabase()
        try await openStore(url).close()
        _ = try await psql(
            "INSERT INTO schema_migrations (name, applied_at) VALUES ('9999_from_the_future', 0)", in: databaseName(url))
        await #expect {
            _ = try await openStore(url)
        } throws: { error in
            "\(error)".contains("upgraded by a newer Waybill (migration 9999_from_the_future)")
        }
    }

    /// An invalid `orders_by_driver_status` (a `CREATE INDEX CONCURRENTLY` by hand that failed, as
    /// SCALING.md advises for large tables) under a recorded 0010 is built again by 0011: 0010's
    /// `IF NOT EXISTS` took it as done, and no query could use it.
    @Test func anInvalidDriverStatusIndexIsBuiltAgain() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        _ = try await seedOrder(store)
        _ = try await seedOrder(store)
        store.close()
        let database = databaseName(url)
        // Back to before 0011, then a concurrent build that fails (two rows share the key) and
        // leaves an invalid index under the name.
        _ = try await psql(
            "DROP INDEX orders_by_driver_status; DELETE FROM schema_migrations WHERE name = '0011_repair_driver_status_index'",
            in: database)
        _ = try? await psql("CREATE UNIQUE INDEX CONCURRENTLY orders_by_driver_status ON orders (title)", in: database)
        let validity = "SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass('orders_by_driver_status')"
        #expect(try await psql(validity, in: database) == "f", "the failed build left an invalid index")
        try await openStore(url).close()
        #expect(try await psql(validity, in: database) == "t")
        #expect(try await psql("SELECT indexdef FROM pg_indexes WHERE indexname = 'orders_by_driver_status'", in: database)
            .contains("(company_id, driver_id, status, id)"))
    }

    /// 0012: a token that existed before it counts as used at the migration, not at its login (every
    /// dispatcher would have been refused at once) nor at its next use (a copied token would get a
    /// fresh idle limit).
    @Test func aTokenFromBeforeTheLastUseColumnCountsAsUsedAtTheMigration() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        let user = try await store.write { tx in
            let company = try tx.insertCompany(name: "Acme")
            return try tx.insertUser(companyID: company.id, role: .dispatcher, email: "d@acme.test", name: "D", passwordHash: "h")
        }
        store.close()
        let database = databaseName(url)
        // Back to before 0012, with a token made a day ago (as an older release stored it).
        _ = try await psql(
            "ALTER TABLE api_tokens DROP COLUMN last_used_at; DELETE FROM schema_migrations WHERE name = '0012_token_last_use'",
            in: database)
        let dayAgo = Int64((Date().timeIntervalSince1970 - 86_400) * 1000)
        _ = try await psql(
            "INSERT INTO api_tokens (token_hash, user_id, created_at, expires_at) VALUES ('\\x0707', \(user.id.rawValue), \(dayAgo), NULL)",
            in: database)
        let reopened = try await openStore(url)
        defer { reopened.close() }
        let found = try await reopened.read { tx in try tx.user(tokenHash: [0x07, 0x07], now: Date()) }
        let lastUse = try #require(found?.lastUsedAt)
        #expect(abs(lastUse.timeIntervalSinceNow) < 60, "used at the migration: \(lastUse)")
    }

    /// A database that is not UTF-8 is refused at open, with the reason: an emoji in a title would
    /// otherwise fail inside a write (22P05) as a server error, where SQLite stores it.
    @Test func aDatabaseThatIsNotUTF8IsRefusedAtOpen() async throws {
        let name = "t_latin1_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
        let url = try await runBlocking { () throws -> String in
            let server = try PostgresServer.shared()
            _ = try server.psql("CREATE DATABASE \(name) ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' TEMPLATE template0")
            return server.url(database: String(name))
        }
        defer { try? PostgresServer.shared().dropDatabase(url) }
        await #expect {
            _ = try await openStore(url)
        } throws: { error in
            "\(error)".contains("LATIN1, not UTF8")
        }
    }

    /// `?options=-c search_path=…` in the URL puts the schema where the operator said (it was
    /// dropped in favour of the store's own options, and everything went to `public`).
    @Test func aSearchPathInTheURLIsWhereTheSchemaGoes() async throws {
        let url = try await freshDatabase()
        _ = try await psql("CREATE SCHEMA waybill", in: databaseName(url))
        let store = try await openStore(url + "?options=-c%20search_path%3Dwaybill")
        store.close()
        let schemas = try await psql(
            "SELECT DISTINCT table_schema FROM information_schema.tables WHERE table_name = 'orders'", in: databaseName(url))
        #expect(schemas == "waybill")
    }
}
