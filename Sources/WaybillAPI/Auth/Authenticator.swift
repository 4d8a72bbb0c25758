import Foundation
import Synchronization
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillStorage

/// Logins, bearer tokens and single-use WebSocket tickets. Only SHA-256 hashes of secrets are stored.
final class Authenticator: SocketAuthenticating {
    private let store: any OrderStore
    private let clock: any WallClock
    /// For the cache, the gates and the request buckets (`ElapsedClock`): never stored.
    private let elapsed: any WallClock
    private let hasher: PasswordHasher
    private let throttle: LoginThrottle
    /// Recently seen tokens, so most requests skip a store read. A revocation through this
    /// process clears the user's entries at once; one made elsewhere (another node) reaches this
    /// one through the `SessionWatcher` (`forget(user:)`), and `cacheLifetime` bounds it anyway:
    /// a revoked token stops working on every node within 1 s.
    private let cache = Mutex(TokenCache())
    /// Bumped by every revocation: a lookup that started before it must not refill the cache.
    private let revocations = Atomic<Int>(0)
    private let cacheLifetime: Duration = .seconds(1)
    /// Tickets are short-lived: SPEC §2 allows at most 60 s.
    let ticketLifetime: Duration

    /// How long an API token works after login (SPEC: tokens are not forever; `--token-days`).
    let tokenLifetime: Duration
    /// How long a dispatcher's token may go unused before it stops working (`--token-idle-hours`;
    /// `nil`: never). A driver's is not limited: a phone may sit in a drawer over a weekend.
    let tokenIdleLimit: Duration?
    /// How often a token's last use is written: every use would be a write per request.
    static let touchInterval: Duration = .seconds(300)
    /// Runs the slow password checks; refuses work past its queue (503 `overloaded`).
    private let pool: KeyStretchingPool
    /// Addresses told to retry later, refused until then without any work.
    private let retryGate = RetryAfterGate(seconds: APIError.overloaded.retryAfter ?? 1)
    /// Addresses (or address and email) just answered 429, refused again for a few seconds at no cost.
    private let limitedGate = RetryAfterGate(seconds: 10)
    private static let rateLimited = APIError(429, "rate_limited", "Too many failed logins; wait a few minutes.")
    /// Counts tickets refused for their shape (`malformed_ticket`) and requests over a user's rate.
    private let metrics: Metrics?
    /// For a token's last use that could not be written (`touch`).
    private let logger: Logger?
    /// Each user's API requests on this node (`admit`); `nil`: no limit.
    private let requestLimiter: UserRequestLimiter?

    init(
        store: any OrderStore, clock: any WallClock, hasher: PasswordHasher, pool: KeyStretchingPool,
        throttle: LoginThrottle, ticketLifetime: Duration = .seconds(30), tokenLifetime: Duration = .seconds(30 * 86_400),
        tokenIdleLimit: Duration? = nil, metrics: Metrics? = nil, requestLimiter: UserRequestLimiter? = nil,
        elapsed: (any WallClock)? = nil, logger: Logger? = nil
    ) {
        self.logger = logger
        self.elapsed = elapsed ?? ElapsedClock.beside(clock)
        self.metrics = metrics
        self.requestLimiter = requestLimiter
        self.store = store
        self.clock = clock
        self.hasher = hasher
        self.pool = pool
        self.ticketLifetime = min(ticketLifetime, .seconds(60))
        self.tokenLifetime = tokenLifetime
        self.tokenIdleLimit = tokenIdleLimit
        self.throttle = throttle
    }

    /// A new API token for the user with these credentials, asked for from `address` (the socket's peer).
    /// - Throws: 401 `invalid_credentials` (same answer and time for unknown email and wrong password),
    ///   429 `rate_limited` after too many failures for one email or from one address,
    ///   `KeyStretchingPool.Overloaded` (503) when too many password checks are already waiting,
    ///   403 `wrong_role` when `role` is given and the user has another (no token is made).
    func login(email: String, password: String, from address: String, role: Role? = nil) async throws -> (token: Secret, user: User) {
        // The gate holds only while password checks are waiting: once the pool has none, the
        // overload its 503 reported is over, and an address that asks again (a NAT of drivers who
        // each waited their second, together asking more than once a second) must get in. Found
        // by a review: the gate kept such an address out for as long as any of them asked, also
        // on an idle server. Letting one login through per second instead let a flood's fifty
        // addresses fill the pool (a real user's login took 7.8 s in one flood run).
        // By the throttle's key (an IPv6 client by its /64): keyed by the full address, each login
        // from a new address of one /64 passed the gate and cost two store writes (found by a review).
        let client = ClientAddress.throttleKey(address)
        guard pool.waitingCount == 0 || !retryGate.mustWait(client, now: elapsed.now()) else {
            throw KeyStretchingPool.Overloaded()
        }
        do {
            return try await checkedLogin(email: email, password: password, from: address, role: role)
        } catch let overloaded as KeyStretchingPool.Overloaded {
            retryGate.refused(client, now: elapsed.now())
            throw overloaded
        }
    }

    private func checkedLogin(
        email: String, password: String, from address: String, role: Role?
    ) async throws -> (token: Secret, user: User) {
        // Shed load before touching the store: a queue full of preferred checks answers every
        // email alike. (Otherwise a check from a clean address may still get in: the pool decides.)
        guard pool.hasRoomForPreferred else { throw KeyStretchingPool.Overloaded() }
        let emailKey = "email:" + email.lowercased(), client = ClientAddress.throttleKey(address)
        let pairKey = client + "\n" + emailKey, askedAt = elapsed.now()
        // Refused a moment ago, refused again without a store write: the throttle's answer cannot
        // have changed much within seconds, and a client that keeps asking would otherwise cost a
        // write transaction per request on the writer that order writes need.
        // Not renewed by asking again: the throttle's own window decides when the client may try,
        // and a shared address (a NAT of drivers) must not stay out for as long as anyone asks.
        if limitedGate.mustWait(client, now: askedAt, renewing: false)
            || limitedGate.mustWait(pairKey, now: askedAt, renewing: false)
        {
            throw Self.rateLimited
        }
        let attempt: LoginThrottle.Attempt
        switch try await throttle.begin(email: emailKey, address: address) {
        case .allowed(let allowed):
            attempt = allowed
        case .limited(let byAddress):
            limitedGate.refused(byAddress ? client : pairKey, now: askedAt)
            throw Self.rateLimited
        }
        let user: User
        do {
            let found = try await store.read { tx in try tx.credentials(email: email) }
            guard let found else {
                try await hasher.verifyNothing(password, preferred: attempt.fromCleanAddress)
                throw APIError(401, "invalid_credentials", "Wrong email or password.")
            }
            guard try await hasher.verify(password, against: found.passwordHash, preferred: attempt.fromCleanAddress) else {
                throw APIError(401, "invalid_credentials", "Wrong email or password.")
            }
            user = found.user
        } catch let overloaded as KeyStretchingPool.Overloaded {
            try? await throttle.release(attempt)  // no password was checked: not a failure
            throw overloaded
        }
        try await throttle.release(attempt)
        // After the password: the answer says no more than a 200 would. Before a token: the panel
        // turned a driver away with a token it could not revoke without logging the driver's phone
        // out (logout is every token of the user) (found by a review, 2026-12-05).
        if let role, user.role != role {
            throw APIError(
                403, "wrong_role",
                role == .dispatcher ? "This login is for dispatchers; drivers use the Waybill app." : "This login is for drivers.")
        }
        let token = Secret.generate(), now = clock.now(), expires = now.adding(tokenLifetime)
        try await store.write { tx in try tx.insertToken(hash: token.hash, for: user.id, createdAt: now, expiresAt: expires) }
        return (token, user)
    }

    /// The user of `Authorization: Bearer <token>`. - Throws: 401.
    func user(forAuthorization header: String?) async throws -> User {
        guard let token = Self.bearerToken(header) else { throw APIError.unauthenticated }
        guard let user = try await user(forToken: token) else {
            throw APIError(401, "not_authenticated", "The token is invalid, expired or revoked.")
        }
        return user
    }

    /// The user of the header's token while the cache holds it (`credential(forToken:)` put it
    /// there within `cacheLifetime`); `nil` for anything else, which `user(forAuthorization:)`
    /// then answers: a miss, a missing or malformed token. Never waits, never reads the store.
    func cachedUser(forAuthorization header: String?) -> User? {
        guard let token = Self.bearerToken(header), Secret.isWellFormed(token) else { return nil }
        return cachedCredential(Secret(token).hash, at: elapsed.now())?.user
    }

    /// The cache's credential for the token hashed `hash`, if it still holds at `at`.
    private func cachedCredential(_ hash: [UInt8], at: Date) -> SocketCredential? {
        // Judged inside the lock, and only the credential leaves it: the whole entry copied out (a
        // tuple, through the runtime's generic copy) cost about 0.6 µs per request.
        cache.withLock { entries in
            guard let hit = entries[hash], hit.until > at else { return nil }
            return hit.credential
        }
    }

    /// The token of an `Authorization: Bearer …` header (nil when there is none).
    static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        // Every request: an ASCII header (any real one) is read on its bytes, without lower-casing a
        // copy of it or walking its characters; anything else takes the general path below.
        var ascii = header
        if let token = ascii.withUTF8({ bytes -> String?? in
            guard bytes.allSatisfy({ $0 < 0x80 }) else { return .none }
            let prefix = "bearer ".utf8
            guard bytes.count > prefix.count,
                zip(bytes, prefix).allSatisfy({ ($0 | ($0 >= 0x41 && $0 <= 0x5A ? 0x20 : 0)) == $1 })
            else { return .some(nil) }
            // `Character.isWhitespace` in ASCII: tab, line feed, vertical tab, form feed, return, space.
            func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || (0x09...0x0D).contains(byte) }
            var start = prefix.count, end = bytes.count
            while start < end, isSpace(bytes[start]) { start += 1 }
            while end > start, isSpace(bytes[end - 1]) { end -= 1 }
            return .some(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self))
        }) {
            return token
        }
        guard header.count > 7, header.lowercased().hasPrefix("bearer ") else { return nil }
        // Trimmed in Swift: `trimmingCharacters(in:)` bridges to NSString on Linux, ~2 % of the server's
        // CPU at 1 000 writes/s (with the Content-Length trim), for one call per request.
        var token = header.dropFirst(7)
        while token.first?.isWhitespace == true { token = token.dropFirst() }
        while token.last?.isWhitespace == true { token = token.dropLast() }
        return String(token)
    }

    func user(forToken token: String) async throws -> User? { try await credential(forToken: token)?.user }

    /// A WebSocket handshake with `?token=` is one of the user's requests too (a ticket's was charged
    /// when it was issued): each connect costs a store read for its replay. Past the rate the hub
    /// closes the socket with 1013 and the app reconnects with backoff.
    func admitsSocket(of user: User) -> Bool { (try? admit(user)) != nil }

    /// Takes one of `user`'s requests on this node (`UserRequestLimiter`), once per request.
    /// - Throws: 429 `rate_limited` with `Retry-After` past the user's rate.
    func admit(_ user: User) throws {
        guard let requestLimiter, case .limited(let seconds) = requestLimiter.admit(user.id, now: elapsed.now()) else { return }
        metrics?.overflowed(.userRequests)
        throw APIError(
            429, "rate_limited", "Too many requests from this user; try again in \(seconds) s.", retryAfter: seconds)
    }

    /// The user of a token and the token's session epoch (a socket's, to tell whether a logout revoked it).
    func credential(forToken token: String) async throws -> SocketCredential? {
        // A token is what `Secret.generate()` makes; anything else (a scanner's `Bearer undefined`, a
        // flood of random text) is refused here, so it costs neither a hash nor a store read.
        guard Secret.isWellFormed(token) else {
            metrics?.overflowed(.malformedToken)
            return nil
        }
        let hash = Secret(token).hash, cachedAt = elapsed.now()
        if let hit = cachedCredential(hash, at: cachedAt) { return hit }
        let now = clock.now()  // the wall clock only for a lookup: a hit needs none
        let generation = revocations.load(ordering: .acquiring)
        let found = try await store.read { tx in try tx.user(tokenHash: hash, now: now) }
        guard let found else { return nil }
        // Judged by the store's last use, which every node moves, never by this node's cache.
        let idle = now.timeIntervalSince(found.lastUsedAt)
        let idleLimit = found.user.role == .dispatcher ? tokenIdleLimit : nil
        if let idleLimit, idle > idleLimit.timeInterval { return nil }
        // Every role's last use is written: a user keeps the tokens used last, so a driver's phone
        // in use outlives a script's hundred logins (only dispatchers' were, so drivers' went by
        // age; a review, 2026-12-07). Written again once it is `touchInterval` old, or a quarter
        // of a shorter idle limit (with a limit under 5 minutes no use was ever written, and an
        // active user was refused).
        let touchAfter = idleLimit.map { min(Self.touchInterval, $0 / 4) } ?? Self.touchInterval
        if idle >= touchAfter.timeInterval { touch(hash, at: now) }
        let credential = SocketCredential(user: found.user, epoch: found.epoch)
        cache.withLock { entries in
            guard revocations.load(ordering: .acquiring) == generation else { return }
            entries.insert(credential, until: cachedAt.adding(cacheLifetime), for: hash)
        }
        return credential
    }

    /// Writes the token's last use, in the background: the request it came with does not wait
    /// for a write, and a failed one is tried again at the token's next lookup (the cache holds
    /// a credential for 1 s). One at a time per token: the requests of a page load miss the cache
    /// together, and each started a write (a review). A failure is logged, at most once a minute:
    /// a store that reads but cannot write (a full disk) would otherwise turn every dispatcher away
    /// after the idle limit with nothing said.
    private func touch(_ hash: [UInt8], at now: Date) {
        guard touching.withLock({ $0.insert(hash).inserted }) else { return }
        Task { [self] in
            defer { _ = touching.withLock { $0.remove(hash) } }
            do {
                try await store.write { tx in try tx.touchToken(hash: hash, at: now) }
            } catch {
                let at = elapsed.now()
                let due = touchFailureLogged.withLock { last -> Bool in
                    guard last.map({ at.timeIntervalSince($0) >= 60 }) ?? true else { return false }
                    last = at
                    return true
                }
                if due { logger?.warning("could not write a token's last use; it may be refused as idle", ["error": "\(error)"]) }
            }
        }
    }
    private let touching = Mutex<Set<[UInt8]>>([])
    private let touchFailureLogged = Mutex<Date?>(nil)
    /// Touches started and not yet done.
    var touchesInFlight: Int { touching.withLock { $0.count } }

    /// Revokes every token of `user` (logout everywhere).
    /// - Returns: the `Logout` the store recorded (the node acts on it at once; see `SessionWatcher.actedOn`).
    func revokeTokens(of user: UserID) async throws -> Logout {
        let logout = try await store.write { tx in try tx.revokeTokens(of: user) }
        forget(user: user)
        return logout
    }

    /// Drops the user's cached tokens (their tokens were revoked, here or on another node), and
    /// keeps a lookup that started before this call from putting one back.
    func forget(user: UserID) {
        cache.withLock { entries in
            revocations.add(1, ordering: .releasing)
            entries.forget(user)
        }
    }

    /// A single-use WebSocket ticket for `user`, valid for `ticketLifetime` (`expiresIn`: whole seconds, as sent).
    /// A ticket for `user`, the user the request's `Authorization` header authenticated (it may
    /// have come from the token cache). The token is checked again inside the ticket's transaction,
    /// in an order a logout cannot slip between (`validTokenUser`): a ticket issued around a logout
    /// is refused or deleted by it, never left to open a socket after it.
    func issueTicket(for user: UserID, authorization header: String?) async throws -> (ticket: Secret, expiresIn: Int) {
        let tokenHash = Secret(Self.bearerToken(header) ?? "").hash
        let ticket = Secret.generate(), now = clock.now(), expires = now.adding(ticketLifetime)
        let issued = try await store.write { tx -> Bool in
            guard let token = try tx.validTokenUser(tokenHash: tokenHash, now: now), token.user == user else { return false }
            try tx.insertTicket(hash: ticket.hash, for: user, epoch: token.epoch, expiresAt: expires)
            return true
        }
        guard issued else { throw APIError(401, "not_authenticated", "The token is invalid, expired or revoked.") }
        return (ticket, Int(ticketLifetime.components.seconds))
    }

    /// The user of a ticket, consuming it: a second use, or a use after expiry, finds nobody.
    ///
    /// Redeeming is a store write, so a ticket that cannot be one (tickets are `Secret.generate()`
    /// text) is refused without touching the store: a flood of garbage `?ticket=` costs no write.
    func redeemTicket(_ ticket: String) async throws -> SocketCredential? {
        guard Secret.isWellFormed(ticket) else {
            metrics?.overflowed(.malformedTicket)
            return nil
        }
        let hash = Secret(ticket).hash, now = clock.now()
        return try await store.write { tx -> SocketCredential? in
            guard let redeemed = try tx.consumeTicket(hash: hash, now: now), let user = try tx.user(redeemed.user) else {
                return nil
            }
            return SocketCredential(user: user, epoch: redeemed.epoch)
        }
    }
}
