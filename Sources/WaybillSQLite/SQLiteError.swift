internal import CSQLite
import WaybillStorage

/// A failed SQLite call: the extended result code, SQLite's message and the SQL that ran.
///
/// Never carries bound values: they may be secrets (token hashes) or personal data, and errors
/// end up in logs. Stays inside this module; the store translates it with ``storeError``.
struct SQLiteError: Error, CustomStringConvertible {
    /// The extended result code (`SQLITE_CONSTRAINT_UNIQUE`, not just `SQLITE_CONSTRAINT`).
    var code: Int32
    var message: String
    var sql: String?

    init(code: Int32, message: String, sql: String? = nil) {
        self.code = code
        self.message = message
        self.sql = sql
    }

    /// The error the connection `db` reports for its last failed call, returned as `code`.
    init(code: Int32, db: OpaquePointer?, sql: String? = nil) {
        self.code = db.map { sqlite3_extended_errcode($0) } ?? code
        // The connection's last error can be stale when `code` came from another source (e.g. exec).
        if self.code & 0xff != code & 0xff { self.code = code }
        let text = db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
        self.message = text ?? String(cString: sqlite3_errstr(code))
        self.sql = sql
    }

    /// The primary result code (`SQLITE_CONSTRAINT` for every constraint failure).
    var primaryCode: Int32 { code & 0xff }

    var description: String {
        var text = "SQLite error \(code): \(message)"
        if let sql { text += " in \"\(sql)\"" }
        return text
    }

    /// The same failure in the store's own words, for callers outside this module.
    var storeError: StoreError {
        switch primaryCode {
        case SQLITE_CONSTRAINT:
            switch code {
            case wb_sqlite_constraint_unique, wb_sqlite_constraint_primarykey:
                return .conflict(message)
            case wb_sqlite_constraint_foreignkey:
                // A reference to a row that does not exist (e.g. an unknown driver id) is the
                // caller's mistake, not a server failure: report it as a conflict, not a 500.
                return .conflict("a referenced record does not exist")
            default:
                return .failure(code: code, message: message)
            }
        case SQLITE_BUSY, SQLITE_LOCKED:
            // The busy timeout ran out: another writer (often another process) holds the lock.
            return .unavailable("database is busy: \(message)")
        case SQLITE_CANTOPEN, SQLITE_MISUSE:
            return .unavailable(message)
        case SQLITE_FULL, SQLITE_IOERR, SQLITE_NOMEM, SQLITE_ABORT:
            // The store cannot take writes for now (a full disk, an I/O error) or the batch this
            // write shared was rolled back: nothing was written, and the same request may succeed
            // later. They were 500s, which the driver app counts toward giving an action up
            // (found by a review, 2026-12-05).
            return .unavailable(message)
        case SQLITE_READONLY:
            // Read-only while it recovers a WAL or cannot take its lock: for now. A write refused
            // as read-only otherwise (a reader's `query_only`, the file moved away) is a bug or
            // needs the operator, and stays a 500 rather than a retry that looks like an outage.
            let recovering = code == SQLITE_READONLY | (1 << 8), cannotLock = code == SQLITE_READONLY | (2 << 8)
            return recovering || cannotLock ? .unavailable(message) : .failure(code: code, message: message)
        default:
            return .failure(code: code, message: message)
        }
    }
}

extension Error {
    /// `self` as the protocol boundary reports it: SQLite errors translated, anything else as is.
    var translatedForStore: any Error {
        (self as? SQLiteError)?.storeError ?? self
    }
}
