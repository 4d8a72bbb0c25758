import Foundation
import Synchronization
import WaybillClient

/// An HTTP server in a dictionary: answers by `METHOD path`, records every request.
final class FakeHTTPTransport: HTTPTransport, Sendable {
    private let state = Mutex<(routes: [String: APIResponse], requests: [APIRequest])>(([:], []))

    /// Answers `method path` (path without query) with `status` and a JSON `body`.
    func route(
        _ method: String,
        _ path: String,
        status: Int = 200,
        headers: [String: String] = [:],
        json body: String = ""
    ) {
        state.withLock {
            $0.routes["\(method) \(path)"] = APIResponse(status: status, headers: headers, body: Data(body.utf8))
        }
    }

    var requests: [APIRequest] { state.withLock { $0.requests } }

    func send(_ request: APIRequest) async throws -> APIResponse {
        try state.withLock { state in
            state.requests.append(request)
            let path = URLComponents(url: request.url, resolvingAgainstBaseURL: false)?.path ?? ""
            guard let response = state.routes["\(request.method) \(path)"] else {
                // As URLSession's own: it names the URL (a client must not pass that text on).
                throw URLError(.cannotConnectToHost, userInfo: [
                    NSURLErrorFailingURLErrorKey: request.url,
                    NSLocalizedDescriptionKey: "Could not connect to the server at \(request.url.absoluteString).",
                ])
            }
            return response
        }
    }
}
