internal import CSQLite
import Foundation

/// One named schema step. Append-only: never edit a migration that has shipped, add a new one.
struct SQLiteMigration: Sendable {
    let name: String
    let sql: String
}

/// Applies named migrations once each, in order, recording them in `schema_migrations`.
enum SQLiteMigrations {
    /// Every migration of the SQLite store, oldest first.
    static let all: [SQLiteMigration] = [
        SQLiteMigration(name: "0001_initial_schema", sql: SQLiteSchema.initial),
        SQLiteMigration(name: "0002_shared_sessions", sql: SQLiteSchema.sharedSessions),
        SQLiteMigration(name: "0003_order_list_indexes", sql: SQLiteSchema.orderListIndexes),
        SQLiteMigration(name: "0004_order_receipts", sql: SQLiteSchema.receipts),
        SQLiteMigration(name: "0005_idempotency_keys", sql: SQLiteSchema.idempotencyKeys),
        SQLiteMigration(name: "0006_outbox_without_counter", sql: SQLiteSchema.outboxWithoutCounter),
        // 0007 (PostgreSQL's ICU collation for search) has no SQLite step.
        SQLiteMigration(name: "0008_session_epochs", sql: SQLiteSchema.sessionEpochs),
        SQLiteMigration(name: "0009_token_expiry_index", sql: SQLiteSchema.tokenExpiryIndex),
        SQLiteMigration(name: "0010_driver_status_index", sql: SQLiteSchema.driverStatusIndex),
        // 0011 (PostgreSQL's repair of an invalid index) has no SQLite step.
        SQLiteMigration(name: "0012_token_last_use", sql: SQLiteSchema.tokenLastUse),
        SQLiteMigration(name: "0013_event_cursor_salt", sql: SQLiteSchema.eventCursorSalt),
        SQLiteMigration(name: "0014_fleet_reads_company_rows", sql: SQLiteSchema.fleetReadsCompanyRows),
        SQLiteMigration(name: "0015_finished_by_driver_index", sql: SQLiteSchema.finishedByDriverIndex),
        SQLiteMigration(name: "0016_order_counts", sql: SQLiteSchema.orderCounts),
    ]

    /// Applies the migrations of `migrations` not yet recorded, in one immediate transaction,
    /// and returns their names.
    ///
    /// The transaction takes the write lock before reading `schema_migrations`, so two processes
    /// opening a new file at once cannot both apply a step: the second waits, then finds it done.
    ///
    /// A file that records a migration not in `migrations` was opened by a newer Waybill: it is
    /// refused with a clear error instead of being used. An older build would run against a schema
    /// it does not know (0006 dropped a table that earlier builds write to on every event).
    @discardableResult
    static func apply(
        _ migrations: [SQLiteMigration] = all, to db: SQLiteConnection, at now: Date
    ) throws(SQLiteError) -> [String] {
        try db.executeScript("BEGIN IMMEDIATE")
        do throws(SQLiteError) {
            try db.executeScript(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    name TEXT PRIMARY KEY NOT NULL,
                    applied_at INTEGER NOT NULL
                )
                """)
            let done = Set(try db.query("SELECT name FROM schema_migrations") { $0.text(0) })
            let known = Set(migrations.map(\.name))
            if let newer = done.subtracting(known).sorted().first {
                throw SQLiteError(
                    code: SQLITE_ERROR,
                    message: "the data file was upgraded by a newer Waybill (migration \(newer)); run that version or newer")
            }
            var applied: [String] = []
            for migration in migrations where !done.contains(migration.name) {
                try db.executeScript(migration.sql)
                try db.execute(
                    "INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)",
                    [.text(migration.name), .date(now)])
                applied.append(migration.name)
            }
            try db.executeScript("COMMIT")
            return applied
        } catch {
            if db.isInTransaction { try? db.executeScript("ROLLBACK") }
            throw error
        }
    }
}
