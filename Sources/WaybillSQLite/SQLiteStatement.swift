internal import CSQLite
import Foundation

/// One prepared statement, owned by this object: `deinit` finalizes it.
///
/// Lives in its connection's statement cache and is used only on that connection's thread.
/// Every use binds, steps to the end (or stops early) and resets, so an idle cached statement
/// holds no read lock.
final class SQLiteStatement {
    let sql: String
    private let handle: OpaquePointer

    /// Prepares `sql` on `db` with the "persistent" hint, since cached statements live long.
    init(sql: String, db: OpaquePointer) throws(SQLiteError) {
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(db, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else {
            sqlite3_finalize(statement)
            throw SQLiteError(code: code, db: db, sql: sql)
        }
        self.sql = sql
        self.handle = statement
    }

    /// Where `bind` copies the texts it binds, kept from one use to the next: SQLite reads them
    /// there in place (`SQLITE_STATIC`) until the next `bind` clears the bindings, which is the
    /// only place the bytes are rewritten. Bound as `SQLITE_TRANSIENT`, SQLite made its own copy of
    /// each text with a `malloc` and freed it at the next bind: about 8 of a write's allocations
    /// (docs/BENCHMARKS.md, 2026-12-06 10:21–).
    private var arena: UnsafeMutablePointer<UInt8>?
    private var arenaCapacity = 0
    /// Texts larger than this together are copied by SQLite instead, so one large value does not
    /// stay in the cache for the connection's life.
    static let arenaLimit = 16 << 10

    // finalize returns the last step's error, which was already reported when it happened.
    deinit {
        sqlite3_finalize(handle)  // first: nothing may point into the arena after it is gone
        arena?.deallocate()
    }

    /// Whether the statement is running: stepped, and not yet done or reset.
    var isBusy: Bool { sqlite3_stmt_busy(handle) != 0 }

    /// Bytes the arena keeps now (tests).
    var arenaBytes: Int { arenaCapacity }

    private var db: OpaquePointer? { sqlite3_db_handle(handle) }

    /// Binds `values` to parameters 1…n; unlisted parameters are NULL.
    func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        // Never while the statement runs: its registers may point into the arena, which is
        // rewritten below (`SQLiteConnection.statement(for:)` gives a nested use its own).
        assert(!isBusy, "a statement was bound again while it ran")
        // Always SQLITE_OK. Also lets go of every pointer into the arena before it is rewritten.
        sqlite3_clear_bindings(handle)
        var texts = 0, textBytes = 0
        for case .text(let text) in values {
            texts += 1
            textBytes += text.utf8.count
        }
        let arena = texts > 0 && textBytes <= Self.arenaLimit ? self.arena(for: textBytes) : nil
        var used = 0
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32
            switch value {
            case .null: code = sqlite3_bind_null(handle, index)
            case .integer(let int): code = sqlite3_bind_int64(handle, index, int)
            case .real(let double): code = sqlite3_bind_double(handle, index, double)
            case .text(var text):
                // An explicit byte count keeps text with an embedded NUL whole. The bytes are passed
                // in place (`withUTF8`): handing the String over as a C string made a NUL-terminated
                // copy of every text shorter than 16 bytes, one allocation per bound text (most of
                // them: statuses, types, groups).
                code = text.withUTF8 { bytes in
                    if let arena {
                        // Into the arena (never NULL: a NULL pointer would bind NULL, not '').
                        let target = arena + used
                        if let source = bytes.baseAddress { target.initialize(from: source, count: bytes.count) }
                        used += bytes.count
                        // (An empty last text may point just past the bytes; SQLite reads none of it.)
                        let text = UnsafeRawPointer(target).assumingMemoryBound(to: CChar.self)
                        return sqlite3_bind_text(handle, index, text, Int32(bytes.count), wb_sqlite_static())
                    }
                    // An empty buffer may have no address, and a NULL pointer would bind NULL, not ''.
                    guard let base = bytes.baseAddress else {
                        return sqlite3_bind_text(handle, index, "", 0, wb_sqlite_transient())
                    }
                    return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                        sqlite3_bind_text(handle, index, $0, Int32(bytes.count), wb_sqlite_transient())
                    }
                }
            case .blob(let bytes) where bytes.isEmpty:
                // An empty array may have no buffer, and a NULL pointer would store NULL, not X''.
                code = sqlite3_bind_zeroblob(handle, index, 0)
            case .blob(let bytes):
                code = bytes.withUnsafeBytes { raw in
                    sqlite3_bind_blob(handle, index, raw.baseAddress, Int32(raw.count), wb_sqlite_transient())
                }
            }
            guard code == SQLITE_OK else { throw SQLiteError(code: code, db: db, sql: sql) }
        }
    }

    /// The arena with room for `count` bytes (at least one), grown if needed. Only after
    /// `sqlite3_clear_bindings`: the old bytes may be freed here.
    private func arena(for count: Int) -> UnsafeMutablePointer<UInt8> {
        if let arena, arenaCapacity >= count { return arena }
        arena?.deallocate()
        arenaCapacity = min(max(count, 256, arenaCapacity * 2), Self.arenaLimit)
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: arenaCapacity)
        arena = grown
        return grown
    }

    /// Advances: `true` when a row is available, `false` when done.
    func step() throws(SQLiteError) -> Bool {
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code: throw SQLiteError(code: code, db: db, sql: sql)
        }
    }

    /// Makes the statement reusable and releases the read snapshot it may hold.
    /// (reset repeats the last step's error, which `step()` already threw.)
    func reset() { sqlite3_reset(handle) }

    // MARK: Columns of the current row

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }
    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }
    func text(_ column: Int32) -> String {
        guard let base = sqlite3_column_text(handle, column) else { return "" }
        // By byte count, not up to the first NUL: text with an embedded NUL reads back whole.
        let count = Int(sqlite3_column_bytes(handle, column))
        return String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self)
    }
    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let base = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }
}

/// The current row of a statement, handed to decoding closures; valid only during the call.
struct SQLiteRow {
    fileprivate let statement: SQLiteStatement
    init(_ statement: SQLiteStatement) { self.statement = statement }

    func int64(_ column: Int32) -> Int64 { statement.int64(column) }
    func int(_ column: Int32) -> Int { Int(statement.int64(column)) }
    func text(_ column: Int32) -> String { statement.text(column) }
    func blob(_ column: Int32) -> [UInt8] { statement.blob(column) }
    func optionalInt64(_ column: Int32) -> Int64? { statement.isNull(column) ? nil : statement.int64(column) }
    func optionalText(_ column: Int32) -> String? { statement.isNull(column) ? nil : statement.text(column) }
    func date(_ column: Int32) -> Date { Date(sqliteMilliseconds: statement.int64(column)) }
    func optionalDate(_ column: Int32) -> Date? { optionalInt64(column).map(Date.init(sqliteMilliseconds:)) }

    /// A `RawRepresentable` enum stored as text; a value this build does not know is corruption.
    func enumValue<E: RawRepresentable>(_ column: Int32, as type: E.Type) throws(SQLiteError) -> E
    where E.RawValue == String {
        let raw = statement.text(column)
        guard let value = E(rawValue: raw) else {
            throw SQLiteError(
                code: SQLITE_MISMATCH, message: "unexpected \(E.self) value in column \(column)", sql: statement.sql)
        }
        return value
    }
}
