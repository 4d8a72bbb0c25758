/// The one error type WaybillClient throws.
///
/// A struct over a private enum, so new kinds can be added without breaking apps that switch on it.
/// Compare with the static members (`error == .notFound`) or match them in a `catch`:
/// ```swift
/// do { try await session.changeStatus(of: id, to: .accepted) }
/// catch WaybillClientError.conflict { showAlert("Someone changed this order first.") }
/// ```
/// Two errors are equal when they are of the same kind; status, code and message are details.
public struct WaybillClientError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Kind: Hashable, Sendable {
        case notAuthenticated, notAllowed, notFound, conflict, rejected, server, unreachable, badResponse
    }

    private let kind: Kind
    /// The HTTP status, when the server answered.
    public let status: Int?
    /// The server's error code (`"invalid_transition"`, …), when it sent one.
    public let code: String?
    /// Human-readable text; never contains a token or ticket.
    public let message: String
    /// The `ETag` of a 2xx answer whose body could not be read (``unreadableAnswer(status:etag:)``).
    let etag: String?

    private init(_ kind: Kind, status: Int? = nil, code: String? = nil, message: String = "", etag: String? = nil) {
        self.kind = kind
        self.status = status
        self.code = code
        self.message = message
        self.etag = etag
    }

    /// 401 or close code 4001: the token is missing, bad or expired. Log in again.
    public static let notAuthenticated = Self(.notAuthenticated)
    /// 403 or close code 4003: the user may not do this.
    public static let notAllowed = Self(.notAllowed)
    /// 404: no such order (or not this driver's).
    public static let notFound = Self(.notFound)
    /// 409 or 412: someone changed the order first. With `status` 409 its state no longer allows the change
    /// (e.g. it was cancelled); with 412 it has a newer version than the one the write named in `If-Match`
    /// (``isStaleVersion``), or, with ``code`` `order_replaced`, the id now names another order than the one
    /// acted on (`If-Order-Created`: the server's data was restored). Either way, show the order as it is
    /// now and let the user decide again.
    public static let conflict = Self(.conflict)
    /// Another 4xx: the server rejected the request (validation, rate limit, …).
    public static let rejected = Self(.rejected)
    /// A 5xx: the server failed.
    public static let server = Self(.server)
    /// No response: offline, DNS, refused, timed out.
    public static let unreachable = Self(.unreachable)
    /// A response this client cannot read. With a 2xx `status` the server did the write, but its
    /// answer was unreadable (something between mangled it): fetch the order to show it.
    public static let badResponse = Self(.badResponse)

    static func unreachable(_ message: String) -> Self { Self(.unreachable, message: message) }
    static func badResponse(_ message: String) -> Self { Self(.badResponse, message: message) }

    /// A write's 2xx answer whose body cannot be read: the write was applied. `etag` is the answer's
    /// `ETag` header, when it had one (it names the version the write made).
    static func unreadableAnswer(status: Int, etag: String?) -> Self {
        Self(.badResponse, status: status, message: "HTTP \(status) with a body this client cannot read", etag: etag)
    }

    /// Whether the server answered "try again later": 429 or a 5xx (a proxy's 502 or 504 too).
    var saysWait: Bool { status == 429 || (status ?? 0) >= 500 }

    /// Whether this is a 2xx answer whose body could not be read: the server applied the write.
    public var isUnreadableSuccess: Bool { kind == .badResponse && status.map { (200..<300).contains($0) } == true }

    /// The error for a non-2xx response with the server's `{"error","message"}` body.
    static func http(status: Int, code: String?, message: String?) -> Self {
        let kind: Kind =
            switch status {
            case 401: .notAuthenticated
            case 403: .notAllowed
            case 404: .notFound
            case 409, 412: .conflict
            case 500...: .server
            default: .rejected
            }
        return Self(kind, status: status, code: code, message: message ?? "HTTP \(status)")
    }

    /// Whether the server refused a write's precondition (412): the order changed since the version it
    /// named, or (``code`` `order_replaced`) it is another order under the same id.
    public var isStaleVersion: Bool { status == 412 }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.kind == rhs.kind }
    public func hash(into hasher: inout Hasher) { hasher.combine(kind) }

    /// Lets `catch WaybillClientError.notFound` match any not-found error.
    public static func ~= (pattern: Self, value: any Error) -> Bool {
        (value as? Self).map { $0.kind == pattern.kind } ?? false
    }

    public var description: String {
        var text = "WaybillClientError.\(kind)"
        if let status { text += " (\(status)\(code.map { " \($0)" } ?? ""))" }
        if !message.isEmpty { text += ": \(message)" }
        return text
    }
}
