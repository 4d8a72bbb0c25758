internal import CSQLite
import Foundation
import WaybillDomain
import WaybillStorage

/// Companies, users, API tokens and WebSocket tickets.
extension SQLiteOrderStore.Transaction {
    private static let userColumns = "id, company_id, role, email, name"

    private static func decodeUser(_ row: SQLiteRow) throws(SQLiteError) -> User {
        User(
            id: UserID(row.int64(0)), companyID: row.optionalInt64(1).map(CompanyID.init),
            role: try row.enumValue(2, as: Role.self), email: row.text(3), name: row.text(4))
    }

    /// The key that makes emails unique regardless of case, for all of Unicode.
    static func emailKey(_ email: String) -> String { email.lowercased() }

    // MARK: Reading

    func company(_ id: CompanyID) throws -> Company? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst("SELECT id, name FROM companies WHERE id = ?", [.id(id)]) {
                Company(id: CompanyID($0.int64(0)), name: $0.text(1))
            }
        }
    }

    func user(_ id: UserID) throws -> User? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst("SELECT \(Self.userColumns) FROM users WHERE id = ?", [.id(id)], Self.decodeUser)
        }
    }

    func credentials(email: String) throws -> (user: User, passwordHash: String)? {
        try perform { () throws(SQLiteError) in
            try db.queryFirst(
                "SELECT \(Self.userColumns), password_hash FROM users WHERE email_key = ?",
                [.text(Self.emailKey(email))]
            ) { row throws(SQLiteError) in (user: try Self.decodeUser(row), passwordHash: row.text(5)) }
        }
    }

    func user(tokenHash: [UInt8], now: Date) throws -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)? {
        try perform { () throws(SQLiteError) -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)? in
            let found = try db.queryFirst(
                """
                SELECT u.id, u.company_id, u.role, u.email, u.name, t.token_hash, t.session_epoch, coalesce(t.last_used_at, t.created_at)
                FROM api_tokens t JOIN users u ON u.id = t.user_id
                WHERE t.token_hash = ? AND t.revoked = 0 AND (t.expires_at IS NULL OR t.expires_at > ?)
                """,
                [.blob(tokenHash), .date(now)]
            ) { row throws(SQLiteError) in
                (user: try Self.decodeUser(row), hash: row.blob(5), epoch: SessionEpoch(row.int64(6)), last: row.date(7))
            }
            // The index lookup already matched; comparing again in constant time keeps the final
            // decision free of timing that depends on how many bytes of a guess were right.
            guard let found, ConstantTime.equals(found.hash, tokenHash) else { return nil }
            return (found.user, found.epoch, found.last)
        }
    }

    func drivers(in company: CompanyID) throws -> [User] {
        try perform { () throws(SQLiteError) in
            try db.query(
                "SELECT \(Self.userColumns) FROM users WHERE company_id = ? AND role = 'driver' ORDER BY id",
                [.id(company)], Self.decodeUser)
        }
    }

    // MARK: Writing

    func insertCompany(name: String) throws -> Company {
        try perform { () throws(SQLiteError) in
            let id = try db.queryFirst("INSERT INTO companies (name) VALUES (?) RETURNING id", [.text(name)]) {
                $0.int64(0)
            }
            return Company(id: CompanyID(id ?? 0), name: name)
        }
    }

    func insertUser(
        companyID: CompanyID?, role: Role, email: String, name: String, passwordHash: String
    ) throws -> User {
        let id = try perform { () throws(SQLiteError) in
            try db.queryFirst(
                """
                INSERT INTO users (company_id, role, email, email_key, name, password_hash)
                VALUES (?, ?, ?, ?, ?, ?) RETURNING id
                """,
                [
                    .id(companyID), .text(role.rawValue), .text(email), .text(Self.emailKey(email)), .text(name),
                    .text(passwordHash),
                ]
            ) { $0.int64(0) }
        }
        return User(id: UserID(id ?? 0), companyID: companyID, role: role, email: email, name: name)
    }

    func insertToken(hash: [UInt8], for user: UserID, createdAt: Date, expiresAt: Date?) throws {
        try perform { () throws(SQLiteError) in
            try db.execute(
                """
                INSERT INTO api_tokens (token_hash, user_id, created_at, expires_at, session_epoch, last_used_at)
                VALUES (?, ?, ?, ?, coalesce((SELECT session_epoch FROM users WHERE id = ?), 0), ?)
                """,
                [.blob(hash), .id(user), .date(createdAt), .date(expiresAt), .id(user), .date(createdAt)])
            // By the user index: only this user's rows (at most one over the limit), keeping the
            // `maxTokensPerUser` used last (`StoreWriter.insertToken`).
            try db.execute(
                """
                DELETE FROM api_tokens WHERE user_id = ? AND id NOT IN (
                    SELECT id FROM api_tokens WHERE user_id = ?
                    ORDER BY coalesce(last_used_at, created_at) DESC, id DESC LIMIT ?)
                """,
                [.id(user), .id(user), .integer(Int64(maxTokensPerUser))])
        }
    }

    func touchToken(hash: [UInt8], at: Date) throws {
        try perform { () throws(SQLiteError) in
            try db.execute(
                "UPDATE api_tokens SET last_used_at = ? WHERE token_hash = ? AND (last_used_at IS NULL OR last_used_at < ?)",
                [.date(at), .blob(hash), .date(at)])
        }
    }

    func validTokenUser(tokenHash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)? {
        try perform { () throws(SQLiteError) -> (user: UserID, epoch: SessionEpoch)? in
            // One write transaction at a time (BEGIN IMMEDIATE): no logout can commit in between.
            try db.queryFirst(
                """
                SELECT user_id, session_epoch FROM api_tokens
                WHERE token_hash = ? AND revoked = 0 AND (expires_at IS NULL OR expires_at > ?)
                """,
                [.blob(tokenHash), .date(now)]
            ) { row throws(SQLiteError) in (UserID(row.int64(0)), SessionEpoch(row.int64(1))) }
        }
    }

    func revokeTokens(of user: UserID) throws -> Logout {
        // No such user: `notFound`, as on PostgreSQL (each threw its own failure, a 500 either way).
        let logout = try perform { () throws(SQLiteError) -> Logout? in
            // In the same order as PostgreSQL's (one writer at a time here: any order would do).
            let epoch = try db.queryFirst(
                "UPDATE users SET session_epoch = session_epoch + 1 WHERE id = ? RETURNING session_epoch", [.id(user)]
            ) { $0.int64(0) }
            guard let epoch else { return nil }
            try db.execute("UPDATE api_tokens SET revoked = 1 WHERE user_id = ? AND revoked = 0", [.id(user)])  // live ones only: fewer pages
            try db.execute("DELETE FROM ws_tickets WHERE user_id = ?", [.id(user)])
            let recorded = try db.queryFirst(
                "INSERT INTO logouts (user_id, at, session_epoch) VALUES (?, ?, ?) RETURNING user_id, at, session_epoch, id",
                [.id(user), .date(clock()), .integer(epoch)]
            ) { Self.logout($0) }
            guard let recorded else { throw SQLiteError(code: SQLITE_ERROR, message: "logout not recorded") }
            return recorded
        }
        guard let logout else { throw StoreError.notFound }
        return logout
    }

    func logoutPoll(since: Date, afterID: Int64?) throws -> LogoutPoll {
        try perform { () throws(SQLiteError) in
            let newest = try db.queryFirst("SELECT coalesce(max(id), 0) FROM logouts", []) { $0.int64(0) } ?? 0
            // Two range reads, merged here: SQLite answers `at >= ? OR id > ?` (and a UNION of the two
            // under one ORDER BY) by walking the whole time index, every 250 ms on every node.
            var logouts = try db.query(
                "SELECT user_id, at, session_epoch, id FROM logouts WHERE at >= ? ORDER BY at, id", [.date(since)]
            ) { Self.logout($0) }
            if let afterID {
                logouts += try db.query(
                    "SELECT user_id, at, session_epoch, id FROM logouts WHERE id > ? AND at < ?",  // the rowid range
                    [.integer(afterID), .date(since)]
                ) { Self.logout($0) }
                logouts.sort { ($0.at, $0.id) < ($1.at, $1.id) }
            }
            return LogoutPoll(logouts: logouts, newestID: newest)
        }
    }

    func sessionEpochs(of users: [UserID]) throws -> [UserID: SessionEpoch] {
        guard !users.isEmpty else { return [:] }
        return try perform { () throws(SQLiteError) in
            let rows = try db.query(
                "SELECT id, session_epoch FROM users WHERE id IN (SELECT value FROM json_each(?))", [.ids(users)]
            ) { row in (UserID(row.int64(0)), SessionEpoch(row.int64(1))) }
            return Dictionary(rows, uniquingKeysWith: { first, _ in first })
        }
    }

    /// A `logouts` row read as `user_id, at, session_epoch, id`: what a poll reads and what revoking
    /// returns alike.
    private static func logout(_ row: SQLiteRow) -> Logout {
        Logout(userID: UserID(row.int64(0)), at: row.date(1), epoch: SessionEpoch(row.int64(2)), id: row.int64(3))
    }

    func reserveLoginAttempt(key: String, at: Date, window: TimeInterval, limit: Int) throws -> Bool {
        // The single writer serializes every reservation: no two can both take the last slot.
        try perform { () throws(SQLiteError) -> Bool in
            let cutoff = at.addingTimeInterval(-window), ahead = at.addingTimeInterval(window)
            let count =
                try db.queryFirst(
                    "SELECT count(*) FROM login_attempts WHERE key = ? AND at > ? AND at <= ?",
                    [.text(key), .date(cutoff), .date(ahead)]
                ) { $0.int(0) } ?? 0
            guard count < limit else { return false }
            try db.execute("INSERT INTO login_attempts (key, at) VALUES (?, ?)", [.text(key), .date(at)])
            return true
        }
    }

    func releaseLoginAttempt(key: String, at: Date) throws {
        try perform { () throws(SQLiteError) in
            try db.execute(
                "DELETE FROM login_attempts WHERE rowid = (SELECT rowid FROM login_attempts WHERE key = ? AND at = ? LIMIT 1)",
                [.text(key), .date(at)])
        }
    }

    func pruneSessionRecords(before cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(SQLiteError) -> Int in
            var deleted = 0
            // In order, each taking what the chunk has left; tickets are those never redeemed (a
            // client that asked and connected with its token instead); tokens are those that
            // expired (one per login; a token with no expiry is never < cutoff).
            for (table, key, time) in Self.sessionRecordTables where deleted < limit {
                try db.execute(
                    "DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) WHERE \(time) < ? LIMIT ?)",
                    [.date(cutoff), .integer(Int64(limit - deleted))])
                deleted += db.changes
            }
            return deleted
        }
    }

    /// What `pruneSessionRecords` deletes, in order: table, row key, time column.
    private static let sessionRecordTables = [
        ("login_attempts", "rowid", "at"), ("logouts", "id", "at"), ("ws_tickets", "ticket_hash", "expires_at"),
        ("api_tokens", "id", "expires_at"),
    ]

    func insertTicket(hash: [UInt8], for user: UserID, epoch: SessionEpoch, expiresAt: Date) throws {
        try perform { () throws(SQLiteError) in
            try db.execute(
                "INSERT INTO ws_tickets (ticket_hash, user_id, expires_at, session_epoch) VALUES (?, ?, ?, ?)",
                [.blob(hash), .id(user), .date(expiresAt), .integer(epoch.rawValue)])
        }
    }

    func consumeTicket(hash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)? {
        try perform { () throws(SQLiteError) -> (user: UserID, epoch: SessionEpoch)? in
            // Delete-and-return in one statement: two concurrent uses cannot both get the user.
            let ticket = try db.queryFirst(
                "DELETE FROM ws_tickets WHERE ticket_hash = ? RETURNING user_id, expires_at, ticket_hash, session_epoch",
                [.blob(hash)]
            ) {
                (user: UserID($0.int64(0)), expiresAt: $0.int64(1), hash: $0.blob(2), epoch: SessionEpoch($0.int64(3)))
            }
            // Tickets nobody used are swept here, so the table stays as small as the live ones, once
            // well past their expiry (`TicketSweep`: one node's clock is a cluster's only on PostgreSQL,
            // but a clock stepped forward and back again does the same here).
            try db.execute("DELETE FROM ws_tickets WHERE expires_at <= ?", [.date(now.addingTimeInterval(-TicketSweep.grace))])
            guard let ticket, ticket.expiresAt > now.sqliteMilliseconds, ConstantTime.equals(ticket.hash, hash) else {
                return nil
            }
            return (ticket.user, ticket.epoch)
        }
    }
}
