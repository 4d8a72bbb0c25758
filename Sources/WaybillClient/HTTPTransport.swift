public import Foundation

/// Sends one HTTP request and returns the response, whatever its status.
///
/// The library's only door to HTTP, so tests pass a fake and apps may pass their own stack.
/// Implementations return 4xx/5xx responses as values and throw only when no response arrived.
public protocol HTTPTransport: Sendable {
    /// Sends `request`.
    /// - Throws: when the server could not be reached or the connection broke.
    func send(_ request: APIRequest) async throws -> APIResponse
}

/// An HTTP request as the client builds it.
public struct APIRequest: Hashable, Sendable, CustomStringConvertible {
    /// `GET`, `POST`, …
    public var method: String
    /// The full URL.
    public var url: URL
    /// Header fields; `Authorization` is never printed (see ``description``).
    public var headers: [String: String]
    /// The body, if any.
    public var body: Data?

    /// A request with the given fields.
    public init(method: String, url: URL, headers: [String: String] = [:], body: Data? = nil) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }

    /// `METHOD path`: no query, no headers, so no token or ticket can leak into a log line.
    public var description: String {
        "\(method) \(URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path)"
    }
}

/// An HTTP response.
public struct APIResponse: Hashable, Sendable {
    /// The status code.
    public var status: Int
    /// Header fields; look them up with ``header(_:)`` (case-insensitive).
    public var headers: [String: String]
    /// The body.
    public var body: Data

    /// A response with the given fields.
    public init(status: Int, headers: [String: String] = [:], body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The value of header `name`, compared case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.key.lowercased() == lowered }?.value
    }
}
