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

    // finalize returns the last step's error, which was already reported when it happened.
    deinit { sqlite3_finalize(handle) }

    private var db: OpaquePointer? { sqlite3_db_handle(handle) }

    /// Binds `values` to parameters 1…n; unlisted parameters are NULL.
    func bind(_ values: [SQLiteValue]) throws(SQLiteError) {
        sqlite3_clear_bindings(handle)  // always SQLITE_OK
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
                // them: statuses, types, groups). SQLite copies them either way (TRANSIENT).
                code = text.withUTF8 { bytes in
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
