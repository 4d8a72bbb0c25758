import Foundation
import WaybillDomain
import WaybillStorage

/// Companies, users, API tokens, WebSocket tickets, logouts and the login throttle.
extension PostgresOrderStore.Transaction {
    private static let userColumns = "id, company_id, role, email, name"

    private static func decodeUser(_ row: PostgresRow) throws(PostgresError) -> User {
        User(
            id: UserID(try row.int64(0)), companyID: try row.optionalInt64(1).map(CompanyID.init),
            role: try row.enumValue(2, as: Role.self), email: row.text(3), name: row.text(4))
    }

    /// The key that makes emails unique regardless of case: Swift's lowercasing, as on SQLite.
    static func emailKey(_ email: String) -> String { email.lowercased() }

    /// The class id of the transaction advisory locks that serialize one login key's
    /// reservations across nodes ("WAYL"); the object id is `hashtext(key)`.
    static let loginLockClass: Int32 = 0x5741_594c

    // MARK: Reading

    func company(_ id: CompanyID) throws -> Company? {
        try perform { () throws(PostgresError) in
            try queryFirst("SELECT id, name FROM companies WHERE id = $1", [.id(id)]) { row throws(PostgresError) in
                Company(id: CompanyID(try row.int64(0)), name: row.text(1))
            }
        }
    }

    func user(_ id: UserID) throws -> User? {
        try perform { () throws(PostgresError) in
            try queryFirst("SELECT \(Self.userColumns) FROM users WHERE id = $1", [.id(id)], Self.decodeUser)
        }
    }

    func credentials(email: String) throws -> (user: User, passwordHash: String)? {
        try perform { () throws(PostgresError) in
            try queryFirst(
                "SELECT \(Self.userColumns), password_hash FROM users WHERE email_key = $1",
                [.text(Self.emailKey(email))]
            ) { row throws(PostgresError) in (user: try Self.decodeUser(row), passwordHash: row.text(5)) }
        }
    }

    func user(tokenHash: [UInt8], now: Date) throws -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)? {
        try perform { () throws(PostgresError) -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)? in
            let found = try queryFirst(
                """
                SELECT u.id, u.company_id, u.role, u.email, u.name, t.token_hash, t.session_epoch, coalesce(t.last_used_at, t.created_at)
                FROM api_tokens t JOIN users u ON u.id = t.user_id
                WHERE t.token_hash = $1 AND NOT t.revoked AND (t.expires_at IS NULL OR t.expires_at > $2)
                """,
                [.bytea(tokenHash), .date(now)]
            ) { row throws(PostgresError) in
                (
                    user: try Self.decodeUser(row), hash: row.bytes(5), epoch: SessionEpoch(try row.int64(6)),
                    last: try row.date(7)
                )
            }
            // The index lookup already matched; comparing again in constant time keeps the final
            // decision free of timing that depends on how many bytes of a guess were right.
            guard let found, ConstantTime.equals(found.hash, tokenHash) else { return nil }
            return (found.user, found.epoch, found.last)
        }
    }

    func drivers(in company: CompanyID) throws -> [User] {
        try perform { () throws(PostgresError) in
            try query(
                "SELECT \(Self.userColumns) FROM users WHERE company_id = $1 AND role = 'driver' ORDER BY id",
                [.id(company)], Self.decodeUser)
        }
    }

    func logoutPoll(since: Date, afterID: Int64?) throws -> LogoutPoll {
        try perform { () throws(PostgresError) in
            // One snapshot (REPEATABLE READ): the newest id covers every row read.
            let newest = try query("SELECT coalesce(max(id), 0) FROM logouts", []) { row throws(PostgresError) in
                try row.int64(0)
            }.first ?? 0
            let logouts = try query(
                "SELECT user_id, at, session_epoch, id FROM logouts WHERE at >= $1 OR id > $2 ORDER BY at, id",
                [.date(since), .integer(afterID ?? Int64.max)]
            ) { row throws(PostgresError) in try Self.logout(row) }
            return LogoutPoll(logouts: logouts, newestID: newest)
        }
    }

    func sessionEpochs(of users: [UserID]) throws -> [UserID: SessionEpoch] {
        guard !users.isEmpty else { return [:] }
        return try perform { () throws(PostgresError) in
            let rows = try query(
                "SELECT id, session_epoch FROM users WHERE id = ANY($1::bigint[])",
                [.text(PostgresArray.literal(users.map { String($0.rawValue) }))]
            ) { row throws(PostgresError) in (UserID(try row.int64(0)), SessionEpoch(try row.int64(1))) }
            return Dictionary(rows, uniquingKeysWith: { first, _ in first })
        }
    }

    /// A `logouts` row read as `user_id, at, session_epoch, id`: what a poll reads and what revoking
    /// returns alike.
    private static func logout(_ row: PostgresRow) throws(PostgresError) -> Logout {
        Logout(
            userID: UserID(try row.int64(0)), at: try row.date(1), epoch: SessionEpoch(try row.int64(2)),
            id: try row.int64(3))
    }

    // MARK: Writing

    func insertCompany(name: String) throws -> Company {
        try perform { () throws(PostgresError) in
            let id = try queryFirst("INSERT INTO companies (name) VALUES ($1) RETURNING id", [.text(name)]) {
                row throws(PostgresError) in try row.int64(0)
            }
            return Company(id: CompanyID(try required(id, "companies")), name: name)
        }
    }

    func insertUser(
        companyID: CompanyID?, role: Role, email: String, name: String, passwordHash: String
    ) throws -> User {
        let id = try perform(savepoint: true) { () throws(PostgresError) in
            try required(
                try queryFirst(
                    """
                    INSERT INTO users (company_id, role, email, email_key, name, password_hash)
                    VALUES ($1, $2, $3, $4, $5, $6) RETURNING id
                    """,
                    [
                        .id(companyID), .text(role.rawValue), .text(email), .text(Self.emailKey(email)), .text(name),
                        .text(passwordHash),
                    ]
                ) { row throws(PostgresError) in try row.int64(0) }, "users")
        }
        return User(id: UserID(id), companyID: companyID, role: role, email: email, name: name)
    }

    func insertToken(hash: [UInt8], for user: UserID, createdAt: Date, expiresAt: Date?) throws {
        try perform(savepoint: true) { () throws(PostgresError) in
            // FOR SHARE: a logout of this user (it raises the epoch first, `revokeTokens`) either
            // commits before and this token gets the new epoch, or waits for this commit and then
            // finds the token and revokes it. Without the lock a login committing during a logout
            // kept a valid token with the old epoch, whose sockets that logout then closed.
            let epoch = try queryFirst("SELECT session_epoch FROM users WHERE id = $1 FOR SHARE", [.id(user)]) {
                row throws(PostgresError) in try row.int64(0)
            }
            _ = try execute(
                """
                INSERT INTO api_tokens (token_hash, user_id, created_at, expires_at, session_epoch, last_used_at)
                VALUES ($1, $2, $3, $4, $5, $3)
                """,
                // No user: 0 here, and the foreign key refuses the row (a conflict, as before).
                [.bytea(hash), .id(user), .date(createdAt), .date(expiresAt), .integer(epoch ?? 0)])
            // By the user index: only this user's rows (at most one over the limit), keeping the
            // `maxTokensPerUser` used last (`StoreWriter.insertToken`).
            _ = try execute(
                """
                DELETE FROM api_tokens WHERE user_id = $1 AND id NOT IN (
                    SELECT id FROM api_tokens WHERE user_id = $1
                    ORDER BY coalesce(last_used_at, created_at) DESC, id DESC LIMIT $2)
                """,
                [.id(user), .integer(Int64(maxTokensPerUser))])
        }
    }

    func touchToken(hash: [UInt8], at: Date) throws {
        try perform { () throws(PostgresError) in
            _ = try execute(
                "UPDATE api_tokens SET last_used_at = $2 WHERE token_hash = $1 AND (last_used_at IS NULL OR last_used_at < $2)",
                [.bytea(hash), .date(at)])
        }
    }

    func validTokenUser(tokenHash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)? {
        try perform { () throws(PostgresError) -> (user: UserID, epoch: SessionEpoch)? in
            // FOR SHARE: a logout's UPDATE of this row waits for our commit, and its DELETE of the
            // user's tickets (a later statement, a later snapshot) then sees what we inserted; a
            // logout that updated the row first makes us wait and then find it revoked.
            try queryFirst(
                """
                SELECT user_id, session_epoch FROM api_tokens
                WHERE token_hash = $1 AND NOT revoked AND (expires_at IS NULL OR expires_at > $2)
                FOR SHARE
                """,
                [.bytea(tokenHash), .date(now)]
            ) { row throws(PostgresError) in (UserID(try row.int64(0)), SessionEpoch(try row.int64(1))) }
        }
    }

    func revokeTokens(of user: UserID) throws -> Logout {
        // No such user: `notFound`, as on SQLite (each threw its own failure, a 500 either way).
        let logout = try perform { () throws(PostgresError) -> Logout? in
            // The epoch first: its row lock orders two logouts of one user (each starts its own
            // epoch) and a login's token insert (`insertToken` reads the epoch FOR SHARE), so a
            // token committed meanwhile is seen by the UPDATE below, which runs after that commit.
            let epoch = try queryFirst(
                "UPDATE users SET session_epoch = session_epoch + 1 WHERE id = $1 RETURNING session_epoch", [.id(user)]
            ) { row throws(PostgresError) in try row.int64(0) }
            guard let epoch else { return nil }
            _ = try execute("UPDATE api_tokens SET revoked = true WHERE user_id = $1 AND NOT revoked", [.id(user)])  // live ones only
            _ = try execute("DELETE FROM ws_tickets WHERE user_id = $1", [.id(user)])
            let recorded = try queryFirst(
                "INSERT INTO logouts (user_id, at, session_epoch) VALUES ($1, $2, $3) RETURNING user_id, at, session_epoch, id",
                [.id(user), .date(clock()), .integer(epoch)]
            ) { row throws(PostgresError) in try Self.logout(row) }
            guard let recorded else { throw PostgresError(.invalidValue, message: "logout not recorded") }
            return recorded
        }
        guard let logout else { throw StoreError.notFound }
        return logout
    }

    func reserveLoginAttempt(key: String, at: Date, window: TimeInterval, limit: Int) throws -> Bool {
        try perform { () throws(PostgresError) -> Bool in
            // Held until this transaction ends: a second node reserving for the same key waits
            // here and then counts this one's row, so two can never both take the last slot.
            _ = try execute(
                "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))",
                [.integer(Int64(Self.loginLockClass)), .text(key)])
            let cutoff = at.addingTimeInterval(-window), ahead = at.addingTimeInterval(window)
            let count =
                try queryFirst(
                    "SELECT count(*) FROM login_attempts WHERE key = $1 AND at > $2 AND at <= $3",
                    [.text(key), .date(cutoff), .date(ahead)]
                ) {
                    row throws(PostgresError) in try row.int(0)
                } ?? 0
            guard count < limit else { return false }
            _ = try execute("INSERT INTO login_attempts (key, at) VALUES ($1, $2)", [.text(key), .date(at)])
            return true
        }
    }

    func releaseLoginAttempt(key: String, at: Date) throws {
        try perform { () throws(PostgresError) in
            _ = try execute(
                """
                DELETE FROM login_attempts
                WHERE id = (SELECT id FROM login_attempts WHERE key = $1 AND at = $2 LIMIT 1)
                """,
                [.text(key), .date(at)])
        }
    }

    func pruneSessionRecords(before cutoff: Date, limit: Int) throws -> Int {
        try perform { () throws(PostgresError) -> Int in
            var deleted = 0
            // In order, each taking what the chunk has left; tickets are those never redeemed (a
            // client that asked and connected with its token instead); tokens are those that
            // expired (one per login; a token with no expiry is never < cutoff).
            for (table, key, time) in Self.sessionRecordTables where deleted < limit {
                deleted += try execute(
                    "DELETE FROM \(table) WHERE \(key) IN (SELECT \(key) FROM \(table) WHERE \(time) < $1 LIMIT $2)",
                    [.date(cutoff), .integer(Int64(limit - deleted))]
                ).affectedRows
            }
            return deleted
        }
    }

    /// What `pruneSessionRecords` deletes, in order: table, row key, time column.
    private static let sessionRecordTables = [
        ("login_attempts", "id", "at"), ("logouts", "id", "at"), ("ws_tickets", "ticket_hash", "expires_at"),
        ("api_tokens", "id", "expires_at"),
    ]

    func insertTicket(hash: [UInt8], for user: UserID, epoch: SessionEpoch, expiresAt: Date) throws {
        try perform(savepoint: true) { () throws(PostgresError) in
            _ = try execute(
                "INSERT INTO ws_tickets (ticket_hash, user_id, expires_at, session_epoch) VALUES ($1, $2, $3, $4)",
                [.bytea(hash), .id(user), .date(expiresAt), .integer(epoch.rawValue)])
        }
    }

    func consumeTicket(hash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)? {
        try perform { () throws(PostgresError) -> (user: UserID, epoch: SessionEpoch)? in
            // Delete-and-return in one statement: two concurrent uses cannot both get the user.
            let ticket = try queryFirst(
                "DELETE FROM ws_tickets WHERE ticket_hash = $1 RETURNING user_id, expires_at, ticket_hash, session_epoch",
                [.bytea(hash)]
            ) { row throws(PostgresError) in
                (
                    user: UserID(try row.int64(0)), expiresAt: try row.int64(1), hash: row.bytes(2),
                    epoch: SessionEpoch(try row.int64(3))
                )
            }
            // Tickets nobody used are swept here, so the table stays as small as the live ones, once
            // well past their expiry: another node's clock set them (`TicketSweep`).
            _ = try execute("DELETE FROM ws_tickets WHERE expires_at <= $1", [.date(now.addingTimeInterval(-TicketSweep.grace))])
            guard let ticket, ticket.expiresAt > now.postgresMilliseconds, ConstantTime.equals(ticket.hash, hash) else {
                return nil
            }
            return (ticket.user, ticket.epoch)
        }
    }
}
