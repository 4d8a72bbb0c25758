import Foundation
import Testing

@testable import WaybillClient

/// Runs `URLSessionHTTPTransport` and `HTTPOrdersAPI` against a real server when one is named:
/// `WAYBILL_CLIENT_LIVE_URL=http://127.0.0.1:8080 WAYBILL_CLIENT_LIVE_EMAIL=… WAYBILL_CLIENT_LIVE_PASSWORD=…`.
/// Skipped otherwise, so the unit run never touches the network.
@Suite(.timeLimit(.minutes(1)), .enabled(if: LiveServer.url != nil)) struct LiveServerTests {
    @Test func loginListWith304AndTicketOverURLSession() async throws {
        let (api, user) = try await HTTPOrdersAPI.logIn(
            server: try #require(LiveServer.url),
            email: LiveServer.email,
            password: LiveServer.password
        )
        #expect(user.email == LiveServer.email)
        guard case .modified(_, let etag) = try await api.orders(ifNoneMatch: nil) else {
            Issue.record("first list fetch was not a 200")
            return
        }
        let tag = try #require(etag, "the list has no ETag")
        #expect(try await api.orders(ifNoneMatch: tag) == .notModified)
        let socket = try await api.eventSocketRequest(since: 1)
        #expect(socket.queryValue("ticket") != nil || socket.queryValue("token") != nil)
        #expect(socket.queryValue("since") == "1")
    }
}

enum LiveServer {
    static let environment = ProcessInfo.processInfo.environment
    static let url = environment["WAYBILL_CLIENT_LIVE_URL"].flatMap(URL.init(string:))
    static let email = environment["WAYBILL_CLIENT_LIVE_EMAIL"] ?? "driver@example.com"
    static let password = environment["WAYBILL_CLIENT_LIVE_PASSWORD"] ?? "password"
}
