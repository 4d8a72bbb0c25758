internal import CSQLite
import Foundation
import WaybillDomain
import WaybillStorage

/// One SQLite connection, owned by this object: `close()` (or `deinit`) finalizes its cached
/// statements and closes it.
///
/// Not thread-safe and not `Sendable`: each connection is opened on, used on and closed on the
/// one thread of the `SQLiteWorker` that owns it (opened with `SQLITE_OPEN_NOMUTEX` for that reason).
final class SQLiteConnection {
    private var handle: OpaquePointer?
    /// Prepared once per SQL text; the SQL texts are constants of this module, so the cache is bounded.
    private var statements: [String: SQLiteStatement] = [:]
    /// The same statements by where their text's bytes are (`cachedStatement`).
    private var statementsByAddress: [UInt: SQLiteStatement] = [:]
    /// The WAL hook's context, retained while the hook is installed (released by `close()`).
    private var walPages: Unmanaged<WALPages>?

    /// Opens (creating if missing) the database at `path` with the settings every Waybill
    /// connection shares: extended result codes, foreign keys on, `synchronous=NORMAL`, and a
    /// busy timeout so a second process writing the same file waits instead of failing.
    init(path: String, busyTimeout: Duration = .seconds(5)) throws(SQLiteError) {
        Self.configureProcess
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &db, flags, WALGathering.registeredName)
        guard code == SQLITE_OK, let db else {
            let error = SQLiteError(code: code, db: db)
            sqlite3_close_v2(db)  // open may allocate a handle even when it fails
            throw error
        }
        handle = db
        for code in [sqlite3_extended_result_codes(db, 1), sqlite3_busy_timeout(db, Int32(clamping: busyTimeout.milliseconds))]
        where code != SQLITE_OK {
            throw SQLiteError(code: code, db: db)
        }
        try executeScript("PRAGMA foreign_keys = ON; PRAGMA synchronous = NORMAL;")
        try registerLower(db)
    }

    /// SQLite's process-wide settings, made before its first connection opens.
    ///
    /// Memory statistics off: Debian's SQLite keeps them by default (`SQLITE_DEFAULT_MEMSTATUS`),
    /// so every one of its allocations and frees takes one global mutex and asks `malloc` for the
    /// block's size; and the build leaves out the lookaside allocator (`SQLITE_OMIT_LOOKASIDE`), so
    /// all of them go to `malloc`: about 19 per order write (bound texts, records, cursors),
    /// counted with a `malloc` probe at 1 000 writes/s (docs/BENCHMARKS.md, 2026-12-06 10:21–).
    /// Nothing here reads those statistics (`sqlite3_memory_used`, a soft heap limit). If SQLite
    /// was already initialized (another part of the process opened a database first), the call
    /// is refused and the statistics stay on; nothing else changes.
    private static let configureProcess: Void = {
        _ = wb_sqlite_memory_statistics_off()
    }()

    /// Whether SQLite keeps its memory statistics in this process (tests: `configureProcess`).
    static var keepsMemoryStatistics: Bool {
        configureProcess
        // With the statistics off, SQLite reports no memory in use at all.
        let probe = sqlite3_malloc(64)
        defer { sqlite3_free(probe) }
        return sqlite3_memory_used() > 0
    }

    /// `waybill_lower(text)`: Swift's `lowercased()` (Unicode's default case mapping), for text
    /// search that folds every script as the PostgreSQL store does; SQLite's own `lower()` and
    /// `LIKE` fold ASCII letters only. NULL stays NULL.
    ///
    /// A text search calls it twice per order in its window (10 000 orders): ASCII text, which most
    /// numbers and titles are, is lowered byte by byte without a Swift `String` (Unicode's mapping of
    /// ASCII is A–Z to a–z and nothing else), and returned as it is when it has no capital. Measured
    /// on a 30 000-order company: a search that matches nothing took 34–57 ms before, 10–14 ms after
    /// (docs/BENCHMARKS.md).
    private func registerLower(_ db: OpaquePointer) throws(SQLiteError) {
        let code = sqlite3_create_function_v2(
            db, "waybill_lower", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nil,
            { context, count, values in
                guard count == 1, let value = values?[0], let text = sqlite3_value_text(value) else {
                    sqlite3_result_null(context)
                    return
                }
                let bytes = UnsafeBufferPointer(start: text, count: Int(sqlite3_value_bytes(value)))
                switch SQLiteConnection.asciiCase(bytes) {
                case .lowerASCII:
                    sqlite3_result_value(context, value)
                    return
                case .upperASCII:
                    withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(1, bytes.count)) { lowered in
                        for (index, byte) in bytes.enumerated() {
                            lowered[index] = CChar(bitPattern: byte &- 0x41 < 26 ? byte | 0x20 : byte)
                        }
                        sqlite3_result_text(context, lowered.baseAddress, Int32(bytes.count), wb_sqlite_transient())
                    }
                    return
                case .other:
                    break
                }
                var lowered = OrderQuery.fold(String(decoding: bytes, as: UTF8.self))
                lowered.withUTF8 { utf8 in
                    utf8.withMemoryRebound(to: CChar.self) {
                        sqlite3_result_text(context, $0.baseAddress, Int32($0.count), wb_sqlite_transient())
                    }
                }
            }, nil, nil, nil)
        guard code == SQLITE_OK else { throw SQLiteError(code: code, db: db) }
    }

    enum ASCIICase: Equatable {
        /// ASCII with no capital letter: already lowered.
        case lowerASCII
        /// ASCII with a capital letter.
        case upperASCII
        /// Any byte over 0x7F: lowered by Swift's Unicode mapping.
        case other
    }

    /// What `waybill_lower` must do with `bytes` (UTF-8).
    static func asciiCase(_ bytes: UnsafeBufferPointer<UInt8>) -> ASCIICase {
        var hasCapital = false
        for byte in bytes {
            if byte >= 0x80 { return .other }
            if byte &- 0x41 < 26 { hasCapital = true }
        }
        return hasCapital ? .upperASCII : .lowerASCII
    }

    deinit { close() }

    /// Finalizes every cached statement, then closes the connection. Idempotent.
    func close() {
        statementsByAddress.removeAll()
        statements.removeAll()  // each statement's deinit finalizes it
        if let handle, orderRowWritesContext != nil { sqlite3_update_hook(handle, nil, nil) }
        // close_v2 always succeeds: with statements left it would defer the close, not fail.
        if let handle { sqlite3_close_v2(handle) }
        handle = nil
        walPages?.release()
        walPages = nil
        orderRowWritesContext?.release()
        orderRowWritesContext = nil
    }

    /// Reports the WAL's size to `pages` after each commit on this connection. It replaces
    /// SQLite's own WAL hook (the automatic checkpoint, which the writer turns off anyway):
    /// nothing is checkpointed here; `SQLiteCheckpointer` reads the size.
    func reportWALPages(to pages: WALPages) {
        guard let handle, walPages == nil else { return }
        let context = Unmanaged.passRetained(pages)
        walPages = context
        sqlite3_wal_hook(
            handle,
            { context, _, _, count in
                if let context { Unmanaged<WALPages>.fromOpaque(context).takeUnretainedValue().committed(pages: Int(count)) }
                return SQLITE_OK
            },
            context.toOpaque())
    }

    private func open() throws(SQLiteError) -> OpaquePointer {
        guard let handle else { throw SQLiteError(code: SQLITE_MISUSE, message: "connection is closed") }
        return handle
    }

    /// Sets how long a statement waits for another connection's lock (0: it fails with busy at once).
    func setBusyTimeout(milliseconds: Int32) {
        if let handle { sqlite3_busy_timeout(handle, milliseconds) }
    }

    /// Whether a transaction is open. SQLite rolls a transaction back by itself on some errors
    /// (`SQLITE_FULL`, `SQLITE_IOERR`, …): the writer checks this after each closure.
    var isInTransaction: Bool { handle.map { sqlite3_get_autocommit($0) == 0 } ?? false }

    /// The file's data version (`SQLITE_FCNTL_DATA_VERSION`): it moves with every commit on this
    /// connection and, once a transaction begins, with every commit another connection made. nil
    /// if SQLite cannot say.
    var dataVersion: UInt32? {
        guard let handle else { return nil }
        var version: UInt32 = 0
        return sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &version) == SQLITE_OK ? version : nil
    }

    /// The newest event id as of this (writer) connection's last commit (`NewestEventCache`).
    var newestEvent = NewestEventCache()

    /// The stages and documents of recently written orders (`OrderPartsCache`): the writer
    /// connection's only; nil on readers.
    var orderParts: OrderPartsCache?

    /// The writes SQLite made to this connection's WAL file, those that went to the file system,
    /// the bytes gathered now, and the times the write lock was let go with bytes still gathered
    /// (`WALGathering`; tests). nil while no WAL is open, or without the gathering VFS.
    var walWrites: (taken: Int, made: Int, gathered: Int, atRelease: Int)? {
        guard let buffer = walBuffer else { return nil }
        return (buffer.writesTaken, buffer.writesMade, buffer.count, buffer.flushesAtRelease)
    }

    /// The buffer gathering this connection's WAL writes (tests); nil as for `walWrites`.
    var walBuffer: WALGatherBuffer? {
        guard let handle else { return nil }
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file) == SQLITE_OK,
            let file, file.pointee.pMethods != nil
        else { return nil }
        return WALGathering.buffer(of: file)
    }

    /// Statements prepared, and addresses in `statementsByAddress` (tests).
    var statementCacheCounts: (statements: Int, addresses: Int) { (statements.count, statementsByAddress.count) }
    /// The bytes the cached statement for `sql` keeps for its bound texts (tests); nil if none.
    func arenaBytes(of sql: String) -> Int? { statements[sql]?.arenaBytes }

    /// Changes to `orders` rows on this connection (`trackOrderRowWrites`); nil until then.
    private(set) var orderRowWrites: OrderRowWrites?
    private var orderRowWritesContext: Unmanaged<OrderRowWrites>?

    /// Counts every change to an `orders` row made on this connection, whatever statement made it
    /// (SQLite's update hook: also a change a trigger or a foreign key's action makes; not a row a
    /// conflict's `REPLACE` deletes, see `OrderRowWrites`), for `OrderPartsCache`'s rows. The
    /// writer connection's only.
    func trackOrderRowWrites() {
        guard let handle, orderRowWrites == nil else { return }
        let writes = OrderRowWrites()
        let context = Unmanaged.passRetained(writes)
        orderRowWrites = writes
        orderRowWritesContext = context
        sqlite3_update_hook(
            handle,
            { context, _, _, table, rowid in
                guard let context, let table, strcmp(table, "orders") == 0 else { return }
                Unmanaged<OrderRowWrites>.fromOpaque(context).takeUnretainedValue().touched(rowid)
            },
            context.toOpaque())
    }

    /// Rows changed by the last INSERT, UPDATE or DELETE.
    var changes: Int { handle.map { Int(sqlite3_changes64($0)) } ?? 0 }

    /// Runs one or more statements without parameters (schema, pragmas, BEGIN/COMMIT).
    func executeScript(_ sql: String) throws(SQLiteError) {
        let db = try open()
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(db, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errstr(code))
            sqlite3_free(message)
            throw SQLiteError(code: sqlite3_extended_errcode(db), message: text, sql: sql)
        }
    }

    /// Runs one statement with `arguments`, ignoring any rows it returns.
    func execute(_ sql: String, _ arguments: [SQLiteValue] = []) throws(SQLiteError) {
        let statement = try statement(for: sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        while try statement.step() {}
    }

    /// Runs one statement with `arguments` and decodes every row it returns.
    func query<T>(
        _ sql: String, _ arguments: [SQLiteValue] = [], _ decode: (SQLiteRow) throws(SQLiteError) -> T
    ) throws(SQLiteError) -> [T] {
        let statement = try statement(for: sql)
        defer { statement.reset() }
        try statement.bind(arguments)
        var rows: [T] = []
        while try statement.step() { rows.append(try decode(SQLiteRow(statement))) }
        return rows
    }

    /// The first row of `query`, or `nil`. Runs the statement to completion, so an
    /// `INSERT/UPDATE/DELETE … RETURNING` applies all its changes.
    func queryFirst<T>(
        _ sql: String, _ arguments: [SQLiteValue] = [], _ decode: (SQLiteRow) throws(SQLiteError) -> T
    ) throws(SQLiteError) -> T? {
        try query(sql, arguments, decode).first
    }

    /// The statement to run `sql` with now: the cached one, unless it is running (a row closure
    /// that runs the same SQL again). That nested use gets a statement of its own, finalized when
    /// it is done: rebinding the running one would reset the outer run under it and rewrite the
    /// bytes its bound texts are read from (`SQLiteStatement.bind`).
    private func statement(for sql: String) throws(SQLiteError) -> SQLiteStatement {
        let cached = try cachedStatement(sql)
        guard cached.isBusy else { return cached }
        return try SQLiteStatement(sql: sql, db: open())
    }

    /// The statement prepared for `sql`, prepared now if it is new.
    ///
    /// Found first by the address of the text's bytes, checked: the SQL texts are
    /// literals, whose bytes never move, and finding one by its text hashed the whole text (100–300
    /// bytes) at every use, six or seven times per order write (the write path's profile,
    /// docs/BENCHMARKS.md). Only the text a statement was prepared from is entered, and the
    /// statement keeps that text, so an address in the table is never another live text's; the
    /// `==` (which two copies of one text pass at once) is insurance. Texts of 15 bytes or fewer (`BEGIN`, `COMMIT`) are stored
    /// inside the `String` itself, at no fixed address; they hash cheaply, and go by text.
    private func cachedStatement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        let address = sql.utf8.count > 15 ? sql.utf8.withContiguousStorageIfAvailable { UInt(bitPattern: $0.baseAddress) } : nil
        if let address, let statement = statementsByAddress[address], statement.sql == sql {
            return statement
        }
        if let known = statements[sql] { return known }
        let statement = try SQLiteStatement(sql: sql, db: try open())
        statements[sql] = statement
        // The text the statement was prepared from, which it keeps (`SQLiteStatement.sql`): a
        // literal's bytes, or a text built at run time whose later copies are found by text. One
        // address per statement, so the table is as bounded as the statements.
        if let address, address != 0 { statementsByAddress[address] = statement }
        return statement
    }
}

extension SQLiteConnection {
    /// The WAL file of the connection's main database, as SQLite names it: from the path it made
    /// absolute and resolved through symbolic links when it opened the database (so not always
    /// the path it was given plus `-wal`). `nil` for a database without a file.
    var walFileName: String? {
        guard let handle, let main = sqlite3_db_filename(handle, "main"), main.pointee != 0,
            let wal = sqlite3_filename_wal(main)
        else { return nil }
        return String(cString: wal)
    }
}
