import Foundation

/// One named schema step. Append-only: never edit a migration that has shipped, add a new one.
struct PostgresMigration: Sendable {
    let name: String
    let sql: String
}

/// Applies named migrations once each, in order, recording them in `schema_migrations`.
///
/// The names are SQLite's (`SQLiteMigrations.all`): one list of schema versions for both stores.
enum PostgresMigrations {
    /// Every migration of the PostgreSQL store, oldest first.
    static let all: [PostgresMigration] = [
        PostgresMigration(name: "0001_initial_schema", sql: PostgresSchema.initial),
        PostgresMigration(name: "0002_shared_sessions", sql: PostgresSchema.sharedSessions),
        PostgresMigration(name: "0003_order_list_indexes", sql: PostgresSchema.orderListIndexes),
        PostgresMigration(name: "0004_order_receipts", sql: PostgresSchema.receipts),
        PostgresMigration(name: "0005_idempotency_keys", sql: PostgresSchema.idempotencyKeys),
        // 0006 (the SQLite outbox without its counter) has no PostgreSQL step.
        PostgresMigration(name: "0007_unicode_search", sql: PostgresSchema.unicodeSearch),
        PostgresMigration(name: "0008_session_epochs", sql: PostgresSchema.sessionEpochs),
        PostgresMigration(name: "0009_token_expiry_index", sql: PostgresSchema.tokenExpiryIndex),
        PostgresMigration(name: "0010_driver_status_index", sql: PostgresSchema.driverStatusIndex),
        PostgresMigration(name: "0011_repair_driver_status_index", sql: PostgresSchema.repairDriverStatusIndex),
        PostgresMigration(name: "0012_token_last_use", sql: PostgresSchema.tokenLastUse),
        PostgresMigration(name: "0013_event_cursor_salt", sql: PostgresSchema.eventCursorSalt),
        // 0014 (SQLite's record that fleets read their company's rows) has no PostgreSQL step.
        PostgresMigration(name: "0015_finished_by_driver_index", sql: PostgresSchema.finishedByDriverIndex),
        PostgresMigration(name: "0016_order_counts", sql: PostgresSchema.orderCounts),
    ]

    /// The transaction-scoped advisory lock every migrating node takes first ("WAYBILL1").
    static let lockKey: Int64 = 0x5741_5942_494c_4c31

    /// Applies the migrations of `migrations` not yet recorded, in one transaction, and returns
    /// their names.
    ///
    /// The transaction holds `pg_advisory_xact_lock` before it even creates `schema_migrations`,
    /// so nodes starting at the same moment migrate once: the others wait for the lock, then
    /// find every step recorded. DDL is transactional on PostgreSQL, so a failed step leaves
    /// nothing behind.
    @discardableResult
    static func apply(
        _ migrations: [PostgresMigration] = all, to db: PostgresConnection, at now: Date,
        deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> [String] {
        try db.executeScript("BEGIN", deadline: deadline)
        do throws(PostgresError) {
            // Another node may hold the lock while it migrates: wait for it longer than the pool's
            // 2 s lock_timeout allows (and let long DDL finish), for this transaction only.
            try db.executeScript(
                "SET LOCAL lock_timeout = '25s'; SET LOCAL statement_timeout = '25s'", deadline: deadline)
            try db.executeScript("SELECT pg_advisory_xact_lock(\(lockKey))", deadline: deadline)
            try db.executeScript(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    name TEXT PRIMARY KEY,
                    applied_at BIGINT NOT NULL
                )
                """, deadline: deadline)
            let done = Set(try db.query("SELECT name FROM schema_migrations", deadline: deadline) { $0.text(0) })
            // A schema a newer release migrated (a rollback, or an old node restarted mid-upgrade):
            // refused at start, as SQLite's file is, instead of starting and failing writes with
            // 500s. Nodes already running are not asked (found by a review, 2026-12-05).
            if let newer = done.subtracting(migrations.map(\.name)).sorted().first {
                throw PostgresError(
                    .invalidValue,
                    message: "the database was upgraded by a newer Waybill (migration \(newer)); run that version or newer")
            }
            var applied: [String] = []
            for migration in migrations where !done.contains(migration.name) {
                try db.executeScript(migration.sql, deadline: deadline)
                try db.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES ($1, $2)",
                    [.text(migration.name), .date(now)], deadline: deadline)
                applied.append(migration.name)
            }
            try db.executeScript("COMMIT", deadline: deadline)
            return applied
        } catch {
            if db.isUsable && db.isInTransaction { _ = try? db.executeScript("ROLLBACK", deadline: deadline) }
            throw error
        }
    }
}
