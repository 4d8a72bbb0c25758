import WaybillStorage

/// A failed libpq call or statement: what went wrong, in a form the store can act on.
///
/// Never carries bound values or the server's full message text about a row (PostgreSQL's
/// detail lines quote the conflicting values, which may be emails or token hashes): only the
/// SQLSTATE, the constraint name and the primary message. Stays inside this module; the store
/// translates it with ``storeError``.
struct PostgresError: Error, CustomStringConvertible {
    enum Kind: Equatable {
        /// The connection broke (`PQstatus` is `CONNECTION_BAD`): it must be dropped.
        case connectionLost
        /// The client-side deadline passed before the server answered; the connection was dropped.
        case timedOut
        /// The server answered with an error; the connection is still usable.
        case server
        /// Could not connect (refused, timed out, bad settings).
        case connectFailed
        /// A value this build cannot store or decode (e.g. a NUL in text); nothing reached the server.
        case invalidValue
    }

    var kind: Kind
    /// The five-character SQLSTATE, when the server sent one (libpq's own errors have none).
    var sqlState: String?
    var constraint: String?
    var message: String
    var sql: String?

    init(_ kind: Kind, sqlState: String? = nil, constraint: String? = nil, message: String, sql: String? = nil) {
        self.kind = kind
        self.sqlState = sqlState
        self.constraint = constraint
        self.message = message
        self.sql = sql
    }

    var description: String {
        var text = "PostgreSQL error"
        if let sqlState { text += " \(sqlState)" }
        text += ": \(message)"
        if let sql { text += " in \"\(sql)\"" }
        return text
    }

    /// The connection can no longer be used: the caller drops it and reconnects later.
    var isConnectionFailure: Bool { kind == .connectionLost || kind == .timedOut || kind == .connectFailed }

    /// A serialization failure or deadlock: the server rolled back, and running the whole
    /// transaction again is the documented remedy.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }

    /// The same failure in the store's own words, safe to show a client: constraint names and
    /// SQLSTATEs only, never the values involved.
    var storeError: StoreError {
        switch kind {
        case .connectionLost: return .unavailable("the connection to PostgreSQL was lost")
        case .timedOut: return .unavailable("PostgreSQL did not answer in time")
        case .connectFailed: return .unavailable("cannot connect to PostgreSQL: \(message)")
        case .invalidValue: return .failure(code: 22000, message: message)
        case .server: break
        }
        let state = sqlState ?? ""
        switch state {
        case "23505": return .conflict(constraint.map { "unique constraint \($0)" } ?? "a unique value is taken")
        case "23503": return .conflict("a referenced record does not exist")
        case "55P03", "57014", "57P01", "57P02", "57P03", "53300", "25P03":
            // lock_timeout, statement_timeout, shutdown, too many connections, idle timeout.
            return .unavailable("PostgreSQL is busy or shutting down (\(state))")
        case "40001", "40P01": return .unavailable("the transaction kept conflicting with others (\(state))")
        case "25006": return .unavailable("PostgreSQL is read-only here (a standby?) (25006)")
        default:
            if state.hasPrefix("08") { return .unavailable("the connection to PostgreSQL failed (\(state))") }
            // Insufficient resources (53: a full disk, out of memory) and system errors (58: an I/O
            // error): the server's trouble, not the request's, and gone once it is fixed: 503, as
            // SQLite's full disk and I/O errors are. They were 500s, which the driver client counts
            // toward giving an action up (a review of the failure contract, 2026-12-05).
            if state.hasPrefix("53") || state.hasPrefix("58") {
                return .unavailable("PostgreSQL is out of resources or failing (\(state))")
            }
            if state.hasPrefix("22") { return .failure(code: 22000, message: "invalid value (\(state))") }
            return .failure(code: Self.numericCode(state), message: "PostgreSQL error \(state)")
        }
    }

    /// Whether `error` is a lock wait that timed out (55P03, as `storeError` words it).
    static func isLockTimeout(_ error: StoreError) -> Bool {
        if case .unavailable(let why) = error { return why.hasSuffix("(55P03)") }
        return false
    }

    /// A stable number for `StoreError.failure`: SQLSTATE class digits (e.g. 42 for 42P01).
    private static func numericCode(_ state: String) -> Int32 {
        Int32(state.prefix(2)) ?? -1
    }
}

extension Error {
    /// `self` as the protocol boundary reports it: PostgreSQL errors translated, anything else as is.
    var translatedForStore: any Error {
        (self as? PostgresError)?.storeError ?? self
    }
}
