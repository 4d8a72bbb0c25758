import Foundation
import Testing
import WaybillAPI
import WaybillClient

/// `URLSessionHTTPTransport` (the client library's default transport) and `HTTPOrdersAPI` against
/// the real server: the login, the list's 200 and then 304 for its `ETag`, and the ticket for the
/// socket. The other end-to-end tests use `SocketHTTPTransport`; this one was run only by hand
/// against a server named in the environment, so CI never ran it (found by a review, 2026-12-04).
@Suite(.timeLimit(.minutes(1)))
struct URLSessionTransportTests {
    @Test func loginListWith304AndTicketOverURLSession() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0]
            let (api, user) = try await HTTPOrdersAPI.logIn(
                server: try #require(URL(string: server.baseURL)), email: driver.email, password: driver.password,
                transport: URLSessionHTTPTransport())
            #expect(user.email == driver.email && user.role == "driver")
            guard case .modified(let orders, let etag) = try await api.orders(ifNoneMatch: nil) else {
                Issue.record("the first list fetch was not a 200")
                return
            }
            #expect(orders.map(\.id).sorted() == (driver.orderIDs ?? []).map { OrderID($0) }.sorted())
            let tag = try #require(etag, "the list has no ETag")
            #expect(try await api.orders(ifNoneMatch: tag) == .notModified)
            let socket = try await api.eventSocketRequest(since: 1)
            #expect(socket.queryValue("ticket")?.isEmpty == false)
            #expect(socket.queryValue("token") == nil, "the token stays out of the URL")
            #expect(socket.queryValue("since") == "1")
        }
    }
}
