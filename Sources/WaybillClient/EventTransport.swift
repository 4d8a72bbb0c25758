public import Foundation

/// Opens WebSockets for the session. `URLSessionEventTransport` on Apple platforms; on Linux the
/// libwebsockets client of WaybillNetwork conforms to it.
///
/// An adapter only has to: open `request.url` (scheme `ws`/`wss`, host, port, path and query) with
/// `request.headers`; deliver each text frame as ``SocketMessage/text(_:)``; deliver the close code as
/// ``SocketMessage/closed(code:)`` and finish the stream; send text; close on request.
public protocol EventTransport: Sendable {
    /// Opens a socket and returns once the handshake is done.
    /// - Throws: if the socket could not be opened (the session treats it as a drop and backs off).
    func connect(_ request: SocketRequest) async throws -> any EventConnection
}

/// One open WebSocket.
///
/// `messages` must be consumable by a single reader and must finish after the socket closes; a stream that
/// finishes without ``SocketMessage/closed(code:)`` counts as an abnormal drop (1006).
public protocol EventConnection: Sendable {
    /// Text frames in arrival order, then `.closed(code:)`, then the end of the stream.
    var messages: AsyncStream<SocketMessage> { get }
    /// Sends one text frame (e.g. `{"type":"ping"}`); does nothing if the socket is closed.
    func send(_ text: String) async
    /// Closes the socket with `code` (normally 1000). `messages` then finishes.
    func close(code: Int) async
}

/// What arrives on an ``EventConnection``.
public enum SocketMessage: Hashable, Sendable {
    /// A text frame.
    case text(String)
    /// The socket closed with this code; `nil` if it dropped without a close frame (1006).
    case closed(code: Int?)
}

/// Where and how to open the event socket: `ws(s)://host/ws/orders/?ticket=…&since=N`.
public struct SocketRequest: Hashable, Sendable, CustomStringConvertible {
    /// The full URL, query included. It may carry a ticket or token: never log it, log ``description``.
    public var url: URL
    /// Extra header fields for the upgrade request.
    public var headers: [String: String]

    /// A request with the given fields.
    public init(url: URL, headers: [String: String] = [:]) {
        self.url = url
        self.headers = headers
    }

    /// The path with its query, for transports that open host and path separately (`/ws/orders/?since=5`).
    public var pathAndQuery: String {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: false)
        let path = components?.percentEncodedPath ?? url.path
        guard let query = components?.percentEncodedQuery, !query.isEmpty else { return path.isEmpty ? "/" : path }
        return (path.isEmpty ? "/" : path) + "?" + query
    }

    /// The URL with credential values (`ticket`, `token`, `access_token`, `password`, any case:
    /// the server's redaction of lws's log lines uses the same names) replaced by `<redacted>`: safe for logs.
    public var description: String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return "<url>" }
        components.queryItems = components.queryItems?.map { item in
            Self.secretNames.contains(item.name.lowercased()) ? URLQueryItem(name: item.name, value: "<redacted>") : item
        }
        return components.string ?? "<url>"
    }

    static let secretNames: Set<String> = ["ticket", "token", "access_token", "password"]

    /// The value of query item `name`, if present.
    public func queryValue(_ name: String) -> String? {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems?.first { $0.name == name }?.value
    }
}
