#if canImport(FoundationNetworking)
    internal import Foundation
    public import FoundationNetworking  // URLSession lives here on Linux
#else
    public import Foundation
#endif

/// ``HTTPTransport`` over `URLSession`, on every platform.
///
/// Uses an ephemeral session with no URL cache: the client does its own `ETag` handling, and a cache
/// would turn the server's 304 back into a 200. It follows no redirect: the API never redirects,
/// and `URLSession` by default followed one to another host *with* the `Authorization` header
/// (measured here: a 302 to another port got `Bearer …`). A redirect is answered as what it is, a
/// 3xx the client reports (`rejected`), e.g. a proxy sending `http://` to `https://`.
public struct URLSessionHTTPTransport: HTTPTransport {
    private let session: URLSession

    /// A transport over `session` (its own redirect policy applies), or over a fresh ephemeral,
    /// cache-less session that follows no redirect.
    public init(session: URLSession? = nil) {
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            self.session = URLSession(configuration: configuration, delegate: NoRedirects(), delegateQueue: nil)
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

/// Refuses every redirect: the 3xx itself is the answer (see ``URLSessionHTTPTransport``).
/// No state: `@unchecked` only because `NSObject` is not `Sendable`.
private final class NoRedirects: NSObject, URLSessionTaskDelegate, @unchecked Sendable {
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }
}
