import Foundation
import Synchronization
import WaybillDomain
import WaybillRealtime
import WaybillStorage

/// Logins, bearer tokens and single-use WebSocket tickets. Only SHA-256 hashes of secrets are stored.
final class Authenticator: SocketAuthenticating {
    private let store: any OrderStore
    private let clock: any WallClock
    private let hasher: PasswordHasher
    private let throttle: LoginThrottle
    /// Recently seen tokens, so most requests skip a store read. A revocation through this
    /// process clears the user's entries at once; one made elsewhere (another node) reaches this
    /// one through the `SessionWatcher` (`forget(user:)`), and `cacheLifetime` bounds it anyway:
    /// a revoked token stops working on every node within 1 s.
    private let cache = Mutex<[[UInt8]: (user: User, until: Date)]>([:])
    /// Bumped by every revocation: a lookup that started before it must not refill the cache.
    private let revocations = Atomic<Int>(0)
    private let cacheLifetime: TimeInterval = 1
    /// Tickets are short-lived: SPEC §2 allows at most 60 s.
    let ticketLifetime: TimeInterval

    init(store: any OrderStore, clock: any WallClock, hasher: PasswordHasher, ticketLifetime: TimeInterval = 30) {
        self.store = store
        self.clock = clock
        self.hasher = hasher
        self.ticketLifetime = min(ticketLifetime, 60)
        self.throttle = LoginThrottle(store: store, clock: clock)
    }

    /// A new API token for the user with these credentials.
    /// - Throws: 401 `invalid_credentials` (same answer and time for unknown email and wrong password),
    ///   429 `rate_limited` after too many failures for one email.
    func login(email: String, password: String) async throws -> (token: Secret, user: User) {
        let key = email.lowercased()
        guard let attempt = try await throttle.begin(key) else {
            throw APIError(429, "rate_limited", "Too many failed logins; wait a few minutes.")
        }
        let found = try await store.read { tx in try tx.credentials(email: email) }
        guard let found else {
            await hasher.verifyNothing(password)
            throw APIError(401, "invalid_credentials", "Wrong email or password.")
        }
        guard await hasher.verify(password, against: found.passwordHash) else {
            throw APIError(401, "invalid_credentials", "Wrong email or password.")
        }
        try await throttle.succeeded(key, started: attempt)
        let token = Secret.generate(), now = clock.now()
        try await store.write { tx in try tx.insertToken(hash: token.hash, for: found.user.id, createdAt: now, expiresAt: nil) }
        return (token, found.user)
    }

    /// The user of `Authorization: Bearer <token>`. - Throws: 401.
    func user(forAuthorization header: String?) async throws -> User {
        guard let header, header.count > 7, header.lowercased().hasPrefix("bearer ") else { throw APIError.unauthenticated }
        let token = header.dropFirst(7).trimmingCharacters(in: .whitespaces)
        guard let user = try await user(forToken: token) else {
            throw APIError(401, "not_authenticated", "The token is invalid, expired or revoked.")
        }
        return user
    }

    func user(forToken token: String) async throws -> User? {
        guard !token.isEmpty, token.count <= 256 else { return nil }
        let hash = Secret(token).hash, now = clock.now()
        if let hit = cache.withLock({ $0[hash] }), hit.until > now { return hit.user }
        let generation = revocations.load(ordering: .acquiring)
        let user = try await store.read { tx in try tx.user(tokenHash: hash, now: now) }
        if let user {
            cache.withLock { entries in
                guard revocations.load(ordering: .acquiring) == generation else { return }
                if entries.count >= 10_000 { entries.removeAll() }  // bounded memory
                entries[hash] = (user, now.addingTimeInterval(cacheLifetime))
            }
        }
        return user
    }

    /// Revokes every token of `user` (logout everywhere).
    func revokeTokens(of user: UserID) async throws {
        try await store.write { tx in try tx.revokeTokens(of: user) }
        forget(user: user)
    }

    /// Drops the user's cached tokens (their tokens were revoked, here or on another node), and
    /// keeps a lookup that started before this call from putting one back.
    func forget(user: UserID) {
        cache.withLock { entries in
            revocations.add(1, ordering: .releasing)
            entries = entries.filter { $0.value.user.id != user }
        }
    }

    /// A single-use WebSocket ticket for `user`, valid `ticketLifetime` seconds.
    func issueTicket(for user: UserID) async throws -> (ticket: Secret, expiresIn: Int) {
        let ticket = Secret.generate(), expires = clock.now().addingTimeInterval(ticketLifetime)
        try await store.write { tx in try tx.insertTicket(hash: ticket.hash, for: user, expiresAt: expires) }
        return (ticket, Int(ticketLifetime))
    }

    /// The user of a ticket, consuming it: a second use, or a use after expiry, finds nobody.
    func redeemTicket(_ ticket: String) async throws -> User? {
        guard !ticket.isEmpty, ticket.count <= 256 else { return nil }
        let hash = Secret(ticket).hash, now = clock.now()
        return try await store.write { tx in
            guard let id = try tx.consumeTicket(hash: hash, now: now) else { return nil }
            return try tx.user(id)
        }
    }
}
