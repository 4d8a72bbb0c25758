import Foundation
import WaybillTesting

/// One HTTP request from a chosen loopback source address (127.0.0.x), so per-client-address
/// behaviour can be tested: the server only trusts the socket's peer address.
struct AddressedClient: Sendable {
    let port: Int
    let source: String
    /// Sent as `X-Forwarded-For` (as a reverse proxy would add it).
    var forwardedFor: String? = nil

    struct Answer: Sendable {
        var status: Int
        var retryAfter: String?
        var body: String
        var elapsed: Duration
    }

    func login(_ email: String, _ password: String) async throws -> Answer {
        let body = try JSONSerialization.data(withJSONObject: ["email": email, "password": password])
        return try await send("POST", "/api/auth/login", body: Array(body))
    }

    func send(_ method: String, _ path: String, body: [UInt8]? = nil) async throws -> Answer {
        let port = self.port, source = self.source, forwarded = forwardedFor.map { [("X-Forwarded-For", $0)] } ?? []
        return try await runBlocking {
            let started = ContinuousClock.now
            let connection = try RawConnection(port: port, timeout: .seconds(30), sourceAddress: source)
            defer { connection.close() }
            let headers = body == nil ? [] : [("Content-Type", "application/json")]
            try connection.send(
                RawConnection.request(method, path, headers: headers + forwarded + [("Connection", "close")], body: body))
            let response = try connection.readResponse()
            return Answer(
                status: response.status, retryAfter: response.headers.first { $0.name == "retry-after" }?.value,
                body: String(decoding: response.body, as: UTF8.self), elapsed: ContinuousClock.now - started)
        }
    }
}
