public import WaybillDomain

/// Who a WebSocket handshake's credentials belong to.
///
/// The hub needs only these two answers; the API's `Authenticator` (tokens and tickets, hashed in
/// the store) conforms. A protocol keeps the live path free of the HTTP application module.
public protocol SocketAuthenticating: Sendable {
    /// The user of a single-use ticket, consuming it; `nil` if unknown, used or expired.
    /// - Throws: when the store cannot answer (the socket is closed with 1011, not 4001).
    func redeemTicket(_ ticket: String) async throws -> User?
    /// The user of an API token; `nil` if unknown, expired or revoked.
    /// - Throws: when the store cannot answer.
    func user(forToken token: String) async throws -> User?
}
