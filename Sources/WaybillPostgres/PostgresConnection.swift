internal import CPostgres
import Foundation
import WaybillDomain

/// One libpq connection, owned by this object: `close()` (or `deinit`) finishes it.
///
/// Not thread-safe and not `Sendable`: a connection is opened, used and closed on the one thread
/// that owns it (a store worker or a lease). Every wait on the server is bounded by a
/// client-side deadline — libpq's own calls would hang for good on a frozen server, since
/// `statement_timeout` is enforced by the server and keepalives never fire while the kernel
/// still ACKs (field notes §2) — so each statement is sent, then the socket is polled until the
/// deadline, and a late answer drops the connection.
final class PostgresConnection {
    private var handle: OpaquePointer?
    /// Statement names by SQL text, prepared lazily on first use. A new connection starts with
    /// none, so "prepare after every reconnect" holds by construction. The SQL texts are
    /// constants of this module, so the cache is bounded.
    private var prepared: [String: String] = [:]
    /// The number in the next prepared statement's name (names are never reused on a connection).
    private var nextStatementNumber = 1
    /// How many statements of the last `executePipeline` were answered in full, also when it threw.
    private(set) var answeredInLastPipeline = 0

    /// Connects with `settings`, waiting at most until `deadline`.
    /// - Throws: `.connectFailed` (refused, bad credentials…) or `.timedOut`.
    init(_ settings: PostgresConnectionSettings, deadline: ContinuousClock.Instant) throws(PostgresError) {
        handle = try Self.connect(settings, deadline: deadline)
    }

    deinit { close() }

    /// Finishes the connection; it needs no answer from the server, so it never blocks. Idempotent.
    func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        prepared.removeAll()
    }

    /// Whether the connection can still be used: open, and libpq has not seen it break.
    var isUsable: Bool { handle.map { PQstatus($0) == CONNECTION_OK } ?? false }

    /// Whether an idle connection still looks open. Nothing arrives on it between calls (these
    /// connections never `LISTEN`), so a readable socket means the server is saying goodbye: a
    /// terminated backend (`pg_terminate_backend`, `idle_session_timeout`, a restart) sends its
    /// FATAL message, then closes. Such a connection is not trusted, whatever libpq would make of
    /// the message. Never waits.
    func isStillOpenWhileIdle() -> Bool {
        guard let db = handle, PQstatus(db) == CONNECTION_OK else { return false }
        var descriptor = pollfd(fd: PQsocket(db), events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, 0) == 0
    }

    /// Whether a transaction is open and failed: every statement but ROLLBACK will be refused.
    var isInFailedTransaction: Bool { handle.map { PQtransactionStatus($0) == PQTRANS_INERROR } ?? false }

    /// Whether a transaction is open (idle in it, or failed).
    var isInTransaction: Bool {
        guard let handle else { return false }
        let status = PQtransactionStatus(handle)
        return status == PQTRANS_INTRANS || status == PQTRANS_INERROR
    }

    // MARK: Statements

    /// Runs `sql` with `arguments` as a prepared statement (prepared on first use).
    @discardableResult
    func execute(
        _ sql: String, _ arguments: [PostgresValue] = [], deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> PostgresResult {
        let texts = try arguments.map { value throws(PostgresError) in try value.wireText() }
        let db = try open(sql)
        let name = try preparedName(for: sql, parameterCount: texts.count, db: db, deadline: deadline)
        let sent = withCStrings(texts) { pointers in
            PQsendQueryPrepared(db, name, Int32(pointers.count), pointers, nil, nil, 0)
        }
        guard sent == 1 else { throw failure(sql: sql) }
        try flush(sql: sql, db: db, deadline: deadline)
        return try awaitResult(sql: sql, db: db, deadline: deadline)
    }

    /// Runs `statements` in order in one round trip (libpq's pipeline mode) and returns their
    /// results in the same order. Inside a transaction they run in it; outside one, they form one
    /// implicit transaction. The first failure is thrown, and every statement after it is skipped
    /// by the server (an aborted pipeline).
    ///
    /// Why: every round trip of a write is a wake-up of the server's backend and of this worker,
    /// and on PostgreSQL each write holds the event counter row through the round trips after its
    /// append (docs/BENCHMARKS.md, "Pipelined writes on PostgreSQL").
    ///
    /// - Parameter flushingAfter: the server is asked to send the answers of this many leading
    ///   statements at once (a Flush), instead of with the rest: so a caller that meets its deadline
    ///   can tell a server that answered those (busy) from one that answered nothing (gone). The
    ///   count of statements answered in full is left in `answeredInLastPipeline`.
    func executePipeline(
        _ statements: [PostgresStatement], flushingAfter: Int = 0, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> [PostgresResult] {
        answeredInLastPipeline = 0
        if statements.count == 1 && flushingAfter == 0 {
            let result = try execute(statements[0].sql, statements[0].arguments, deadline: deadline)
            answeredInLastPipeline = 1
            return [result]
        }
        guard let first = statements.first else { return [] }
        let texts = try statements.map { statement throws(PostgresError) in
            try statement.arguments.map { value throws(PostgresError) in try value.wireText() }
        }
        let db = try open(first.sql)
        guard PQenterPipelineMode(db) == 1 else { throw failure(sql: first.sql) }
        // What the server will answer, in order: a statement not prepared yet on this connection
        // is prepared inside the pipeline, just before its first use, so nothing reaches the
        // server before the pipeline's BEGIN (a prepare waits on the tables' locks).
        var answers: [(statement: Int, preparing: String?)] = []
        var names: [String: String] = [:]
        for (index, statement) in statements.enumerated() {
            var name = prepared[statement.sql] ?? names[statement.sql]
            if name == nil {
                let fresh = "wb\(nextStatementNumber)"
                nextStatementNumber += 1
                // nil parameter types: the server infers each from the statement.
                guard PQsendPrepare(db, fresh, statement.sql, Int32(texts[index].count), nil) == 1 else {
                    throw abandon(sql: statement.sql)
                }
                answers.append((index, fresh))
                names[statement.sql] = fresh
                name = fresh
            }
            let sent = withCStrings(texts[index]) { pointers in
                PQsendQueryPrepared(db, name, Int32(pointers.count), pointers, nil, nil, 0)
            }
            // Half a pipeline queued in libpq cannot be taken back: the connection goes.
            guard sent == 1 else { throw abandon(sql: statement.sql) }
            answers.append((index, nil))
            if index + 1 == flushingAfter && index + 1 < statements.count {
                guard PQsendFlushRequest(db) == 1 else { throw abandon(sql: statement.sql) }
            }
        }
        guard PQpipelineSync(db) == 1 else { throw abandon(sql: first.sql) }
        try flush(sql: first.sql, db: db, deadline: deadline)

        var results: [PostgresResult?] = Array(repeating: nil, count: statements.count)
        var firstError: PostgresError?
        for answer in answers {
            let sql = statements[answer.statement].sql
            let (result, failed) = try drainQuery(sql: sql, db: db, deadline: deadline)
            if firstError == nil { firstError = failed }
            if answer.preparing == nil { results[answer.statement] = result }
            if PQstatus(db) == CONNECTION_BAD { break }
            if let name = answer.preparing {
                // Prepared statements outlive the transaction (a rolled-back one too).
                if result != nil { prepared[sql] = name }
            } else {
                answeredInLastPipeline = answer.statement + 1
            }
        }
        if PQstatus(db) != CONNECTION_BAD {
            try waitUntilNotBusy(sql: first.sql, db: db, deadline: deadline)
            let sync = PQgetResult(db)
            let synced = sync.map { PQresultStatus($0) == PGRES_PIPELINE_SYNC } ?? false
            if let sync { PQclear(sync) }
            if synced && PQexitPipelineMode(db) == 1 {
                if let firstError { throw firstError }
                var answered: [PostgresResult] = []
                answered.reserveCapacity(results.count)
                for (result, statement) in zip(results, statements) {
                    guard let result else { throw abandon(sql: statement.sql) }
                    answered.append(result)
                }
                return answered
            }
        }
        // Broken, or out of step with libpq's pipeline: judged as in `awaitResult`.
        close()
        throw PostgresError(
            .connectionLost, sqlState: firstError?.sqlState,
            message: firstError?.message ?? "the connection was closed", sql: first.sql)
    }

    /// Runs one or more statements without parameters (schema scripts, BEGIN, COMMIT) through the
    /// simple query protocol; returns the last result.
    @discardableResult
    func executeScript(_ sql: String, deadline: ContinuousClock.Instant) throws(PostgresError) -> PostgresResult {
        let db = try open(sql)
        guard PQsendQuery(db, sql) == 1 else { throw failure(sql: sql) }
        try flush(sql: sql, db: db, deadline: deadline)
        return try awaitResult(sql: sql, db: db, deadline: deadline)
    }

    /// Rows of `sql` decoded with `decode`.
    func query<T>(
        _ sql: String, _ arguments: [PostgresValue] = [], deadline: ContinuousClock.Instant,
        _ decode: (PostgresRow) throws(PostgresError) -> T
    ) throws(PostgresError) -> [T] {
        try execute(sql, arguments, deadline: deadline).rows(decode)
    }

    /// The first row of `query`, or `nil`.
    func queryFirst<T>(
        _ sql: String, _ arguments: [PostgresValue] = [], deadline: ContinuousClock.Instant,
        _ decode: (PostgresRow) throws(PostgresError) -> T
    ) throws(PostgresError) -> T? {
        try query(sql, arguments, deadline: deadline, decode).first
    }

    // MARK: Internals

    private func open(_ sql: String) throws(PostgresError) -> OpaquePointer {
        guard let handle else { throw PostgresError(.connectionLost, message: "connection is closed", sql: sql) }
        return handle
    }

    private func preparedName(
        for sql: String, parameterCount: Int, db: OpaquePointer, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> String {
        if let name = prepared[sql] { return name }
        let name = "wb\(nextStatementNumber)"
        nextStatementNumber += 1
        // nil parameter types: the server infers each from the statement.
        guard PQsendPrepare(db, name, sql, Int32(parameterCount), nil) == 1 else { throw failure(sql: sql) }
        try flush(sql: sql, db: db, deadline: deadline)
        try awaitResult(sql: sql, db: db, deadline: deadline)
        prepared[sql] = name
        return name
    }

    /// Sends whatever libpq still holds of the query. The connection is non-blocking, so a
    /// large parameter to a server that stopped reading cannot block past the deadline.
    private func flush(sql: String, db: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) {
        while true {
            switch PQflush(db) {
            case 0: return
            case 1: break
            default: throw failure(sql: sql)
            }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                close()
                throw PostgresError(.timedOut, message: "could not send before the deadline", sql: sql)
            }
            var descriptor = pollfd(fd: PQsocket(db), events: Int16(POLLIN | POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: left.milliseconds + 1))
            // The server may be sending while we send (notices, errors): read it so neither side stalls.
            if ready > 0 && descriptor.revents & Int16(POLLIN) != 0 && PQconsumeInput(db) == 0 {
                throw failure(sql: sql)
            }
        }
    }

    /// Waits for the answer to what was just sent, then drains every result (libpq requires it
    /// before the next query). Returns the last result, or throws the first error.
    @discardableResult
    private func awaitResult(
        sql: String, db: OpaquePointer, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> PostgresResult {
        let (last, firstError) = try drainQuery(sql: sql, db: db, deadline: deadline)
        // Judge the connection only after draining: a terminated backend first sends its FATAL
        // (57P01) as an ordinary error result, and only the next read finds the socket closed.
        if let handle, PQstatus(handle) == CONNECTION_BAD {
            close()
            throw PostgresError(
                .connectionLost, sqlState: firstError?.sqlState,
                message: firstError?.message ?? "the connection was closed", sql: sql)
        }
        if let firstError { throw firstError }
        if let last { return last }
        throw failure(sql: sql)
    }

    /// Reads one query's results up to the NULL that ends them: its last good result and its
    /// first error (a statement a failed pipeline skipped, PGRES_PIPELINE_ABORTED, gives neither).
    /// Waits before every PQgetResult, not only the first: it blocks until the next message is in,
    /// and a server that froze between a result and its ReadyForQuery would hold this thread forever.
    private func drainQuery(
        sql: String, db: OpaquePointer, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> (result: PostgresResult?, error: PostgresError?) {
        var last: PostgresResult?
        var firstError: PostgresError?
        while true {
            try waitUntilNotBusy(sql: sql, db: db, deadline: deadline)
            guard let raw = PQgetResult(db) else { break }
            let result = PostgresResult(handle: raw, sql: sql)
            switch PQresultStatus(raw) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY: last = result
            case PGRES_PIPELINE_ABORTED: break
            default: if firstError == nil { firstError = error(from: raw, sql: sql) }
            }
            // Broken: libpq may keep handing out error results; the caller judges the connection.
            if PQstatus(db) == CONNECTION_BAD { break }
        }
        return (last, firstError)
    }

    /// Reads until libpq has a whole message to return, up to `deadline`; past it the connection
    /// is dropped (PQfinish needs no reply) rather than waited on, and the store reconnects later.
    private func waitUntilNotBusy(sql: String, db: OpaquePointer, deadline: ContinuousClock.Instant) throws(PostgresError) {
        while PQisBusy(db) == 1 {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                close()
                throw PostgresError(.timedOut, message: "no answer before the deadline", sql: sql)
            }
            var descriptor = pollfd(fd: PQsocket(db), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: left.milliseconds + 1))
            if ready < 0 && errno != EINTR { return }  // PQgetResult reports the broken socket
            if ready > 0 && PQconsumeInput(db) == 0 { return }
        }
    }

    /// The error of a failed result, with the fields a caller may act on.
    private func error(from result: OpaquePointer, sql: String) -> PostgresError {
        let state = PQresultErrorField(result, wb_pq_diag_sqlstate).map { String(cString: $0) }
        let constraint = PQresultErrorField(result, wb_pq_diag_constraint_name).map { String(cString: $0) }
        let primary = PQresultErrorField(result, wb_pq_diag_message_primary).map { String(cString: $0) }
        let message = primary ?? Self.firstLine(PQresultErrorMessage(result))
        return PostgresError(.server, sqlState: state, constraint: constraint, message: message, sql: sql)
    }

    /// The failure after a send or a result went missing: libpq's message, and the connection
    /// dropped if it broke.
    private func failure(sql: String) -> PostgresError {
        let message = handle.map { Self.firstLine(PQerrorMessage($0)) } ?? "connection is closed"
        if handle.map({ PQstatus($0) == CONNECTION_BAD }) ?? true {
            close()
            return PostgresError(.connectionLost, message: message, sql: sql)
        }
        return PostgresError(.server, message: message, sql: sql)
    }

    /// The failure of a pipeline that cannot be finished: the connection is closed, since libpq
    /// would still expect the rest of it.
    private func abandon(sql: String) -> PostgresError {
        let message = handle.map { Self.firstLine(PQerrorMessage($0)) } ?? "connection is closed"
        close()
        return PostgresError(.connectionLost, message: message, sql: sql)
    }

    /// Whether a refused connect says the server (or the role's, or the database's limit) has no
    /// connection slot left. PostgreSQL's English messages; a server set to another language for
    /// `lc_messages` is taken for unreachable, as before.
    static func isOutOfConnections(_ message: String) -> Bool {
        message.contains("too many clients") || message.contains("too many connections")
            || message.contains("remaining connection slots are reserved")
    }

    static func firstLine(_ text: UnsafePointer<CChar>?) -> String {
        guard let text else { return "unknown error" }
        let line = String(cString: text).split(separator: "\n", omittingEmptySubsequences: true).first
        return line.map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown error"
    }

    // MARK: Connecting

    /// Starts a non-blocking connect and polls it until `deadline`, so even a server that
    /// accepts TCP but never answers (frozen) cannot hold the caller longer.
    private static func connect(
        _ settings: PostgresConnectionSettings, deadline: ContinuousClock.Instant
    ) throws(PostgresError) -> OpaquePointer {
        // Both lists end with NULL, as PQconnectStartParams requires.
        let started = withCStrings(settings.keywords.map(\.0) + [nil]) { keys in
            withCStrings(settings.keywords.map(\.1) + [nil]) { values in PQconnectStartParams(keys, values, 0) }
        }
        guard let db = started else { throw PostgresError(.connectFailed, message: "out of memory") }
        var status = PGRES_POLLING_WRITING
        while true {
            if PQstatus(db) == CONNECTION_BAD || status == PGRES_POLLING_FAILED {
                let message = firstLine(PQerrorMessage(db))
                PQfinish(db)
                // The server answered, and is up: it is out of connection slots (53300; libpq
                // gives no SQLSTATE for a refused connect, so its message is read). That call
                // fails as busy; taking it for an outage dropped the node's working connections.
                if isOutOfConnections(message) { throw PostgresError(.server, sqlState: "53300", message: message) }
                throw PostgresError(.connectFailed, message: message)
            }
            if status == PGRES_POLLING_OK { break }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                PQfinish(db)
                throw PostgresError(.timedOut, message: "timeout expired while connecting")
            }
            let events = status == PGRES_POLLING_READING ? POLLIN : POLLOUT
            var descriptor = pollfd(fd: PQsocket(db), events: Int16(events), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: left.milliseconds + 1))
            if ready > 0 || (ready < 0 && errno != EINTR) { status = PQconnectPoll(db) }
        }
        wb_pq_silence_notices(db)
        // Non-blocking sends: `flush` then waits on the socket with the caller's deadline.
        guard PQsetnonblocking(db, 1) == 0 else {
            let message = firstLine(PQerrorMessage(db))
            PQfinish(db)
            throw PostgresError(.connectFailed, message: message)
        }
        return db
    }
}

/// One statement of a pipeline (`PostgresConnection.executePipeline`).
struct PostgresStatement {
    let sql: String
    let arguments: [PostgresValue]

    init(_ sql: String, _ arguments: [PostgresValue] = []) {
        self.sql = sql
        self.arguments = arguments
    }
}

/// Calls `body` with C strings for `texts` (NULL for `nil`), valid only during the call.
func withCStrings<R>(_ texts: [String?], _ body: ([UnsafePointer<CChar>?]) -> R) -> R {
    let copies = texts.map { $0.map { strdup($0) } ?? nil }
    defer { for copy in copies { free(copy) } }
    return body(copies.map { $0.map { UnsafePointer($0) } })
}
