public import WaybillClient
import Foundation
import WaybillNetwork

/// `HTTPTransport` over `WaybillNetwork.HTTPClient` (plain sockets on their own threads).
///
/// On Linux, prefer it to `URLSessionHTTPTransport`: cancelling a task that waits in
/// FoundationNetworking's `URLSession` can deadlock the process, and `DriverSession` cancels
/// fetches whenever it stops or supersedes them.
public struct SocketHTTPTransport: HTTPTransport {
    private let timeout: Duration

    public init(timeout: Duration = .seconds(30)) { self.timeout = timeout }

    public func send(_ request: APIRequest) async throws -> APIResponse {
        let answer = try await HTTPClient.send(
            method: request.method, url: request.url, headers: request.headers.map { ($0.key, $0.value) },
            body: request.body.map(Array.init), timeout: timeout)
        return APIResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }
}
