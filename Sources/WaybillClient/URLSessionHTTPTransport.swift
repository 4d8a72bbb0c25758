#if canImport(FoundationNetworking)
    internal import Foundation
    public import FoundationNetworking  // URLSession lives here on Linux
#else
    public import Foundation
#endif

/// ``HTTPTransport`` over `URLSession`, on every platform.
///
/// Uses an ephemeral session with no URL cache: the client does its own `ETag` handling, and a cache
/// would turn the server's 304 back into a 200.
public struct URLSessionHTTPTransport: HTTPTransport {
    private let session: URLSession

    /// A transport over `session`, or over a fresh ephemeral, cache-less session.
    public init(session: URLSession? = nil) {
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            self.session = URLSession(configuration: configuration)
        }
    }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        urlRequest.httpBody = request.body
        for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
        let (data, response) = try await session.data(for: urlRequest)
        guard let http = response as? HTTPURLResponse else { throw WaybillClientError.badResponse("not HTTP") }
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name] = value }
        }
        return APIResponse(status: http.statusCode, headers: headers, body: data)
    }
}
