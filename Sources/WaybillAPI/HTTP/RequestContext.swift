import Synchronization
import WaybillDomain
import WaybillNetwork

/// Per-request state a handler may need: path parameters and the authenticated user.
///
/// `@unchecked Sendable`: one request task owns it; the user slot is a `Mutex` for the logger.
final class RequestContext: @unchecked Sendable {
    let parameters: PathParameters
    private let authenticator: Authenticator
    private let request: HTTPRequest
    /// The user once admitted; `identified`: once the token named them (the log line's user).
    private let authenticated = Mutex<User?>(nil)
    private let identified = Mutex<User?>(nil)

    init(parameters: PathParameters, request: HTTPRequest, authenticator: Authenticator) {
        self.parameters = parameters
        self.request = request
        self.authenticator = authenticator
    }

    /// The user of the bearer token (any role, with or without company). The first call takes one
    /// of the user's requests (`Authenticator.admit`) unless `admitting` is false (logout); the user
    /// is kept, so later calls do not.
    /// - Throws: 401 `APIError.unauthenticated`, 429 `rate_limited`.
    func requireUser(admitting: Bool = true) async throws -> User {
        if let user = authenticated.withLock({ $0 }) { return user }
        let user = try await authenticator.user(forAuthorization: request.headers["authorization"])
        try take(user, admitting: admitting)
        return user
    }

    /// Keeps the user the token named, after taking one of their requests when `admitting`.
    private func take(_ user: User, admitting: Bool) throws {
        identified.withLock { $0 = user }  // a request refused for its rate is still logged with its user
        if admitting { try authenticator.admit(user) }
        authenticated.withLock { $0 = user }
    }

    /// The acting user with a company, as the domain rules see them.
    /// - Throws: 401, or 403 `no_company`.
    func requireActor() async throws -> Actor { try Self.actor(try await requireUser()) }

    /// `user` as the domain rules see them. - Throws: 403 `no_company`.
    private static func actor(_ user: User) throws -> Actor {
        guard let company = user.companyID else { throw APIError.noCompany }
        return Actor(userID: user.id, companyID: company, role: user.role)
    }

    /// `requireActor` without waiting: the user of a token the cache knows
    /// (`Authenticator.cachedUser`), admitted as `requireUser` admits; `nil` when naming the user
    /// needs the store (a cache miss, or a header the cache cannot answer): then nothing was
    /// taken, and `requireActor` does the rest.
    /// - Throws: 429 `rate_limited`, 403 `no_company`.
    func actorNow() throws -> Actor? {
        if let user = authenticated.withLock({ $0 }) { return try Self.actor(user) }
        guard let user = authenticator.cachedUser(forAuthorization: request.headers["authorization"]) else { return nil }
        try take(user, admitting: true)
        return try Self.actor(user)
    }

    /// Like `requireActor`, for dispatcher-only routes. - Throws: 403 for drivers.
    func requireDispatcher() async throws -> Actor {
        let actor = try await requireActor()
        try Self.requireDispatcher(actor)
        return actor
    }

    /// The role check alone, for routes that parse their input first (DESIGN.md's order of checks:
    /// 400 before 403). - Throws: 403 for drivers.
    static func requireDispatcher(_ actor: Actor) throws {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
    }

    /// A path parameter as a positive integer id. - Throws: 404 (a malformed id names nothing).
    func id<ID: Identifier>(_ name: String, as type: ID.Type = ID.self) throws -> ID {
        guard let text = parameters[name], Self.isCanonicalID(text), let raw = Int64(text) else { throw APIError.notFound }
        return ID(raw)
    }

    /// An id as the server writes it: ASCII digits, the first not 0. `Int64` also takes `+1` and
    /// `01`, which then named order 1; a keyed write's retry spelled `/1/` of one sent to `/+1/`
    /// was refused as another request, since the key stores the path (a review, 2026-12-07).
    static func isCanonicalID(_ text: String) -> Bool {
        guard let first = text.utf8.first, first != UInt8(ascii: "0") else { return false }
        return text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// The user id for the request log line, if authentication happened.
    var loggedUserID: String { identified.withLock { $0.map { "\($0.id)" } ?? "-" } }
}
