public import WaybillDomain
public import WaybillStorage

/// Who a WebSocket handshake's credentials belong to.
///
/// The hub needs only these two answers; the API's `Authenticator` (tokens and tickets, hashed in
/// the store) conforms. A protocol keeps the live path free of the HTTP application module.
public protocol SocketAuthenticating: Sendable {
    /// The user of a single-use ticket, consuming it; `nil` if unknown, used or expired.
    /// - Throws: when the store cannot answer (the socket is closed with 1011, not 4001).
    func redeemTicket(_ ticket: String) async throws -> SocketCredential?
    /// The user of an API token; `nil` if unknown, expired or revoked.
    /// - Throws: when the store cannot answer.
    func credential(forToken token: String) async throws -> SocketCredential?
    /// Whether `user` may open one more socket with a token now (the user's request rate); a
    /// ticket's socket is not asked (the ticket's request was). `false`: closed with 1013.
    func admitsSocket(of user: User) -> Bool
}

extension SocketAuthenticating {
    /// No rate: every socket is admitted (test doubles, and any authenticator without a limit).
    public func admitsSocket(of user: User) -> Bool { true }
}

/// What a handshake's ticket or token proved: its user, and the session epoch of the token (a
/// ticket's is the token's it was issued for). A logout closes the socket only if it revoked that
/// token (`Logout.revokes`), not the socket of a login made after it.
public struct SocketCredential: Sendable, Equatable {
    public var user: User
    public var epoch: SessionEpoch
    public init(user: User, epoch: SessionEpoch) {
        self.user = user
        self.epoch = epoch
    }
}
