import Foundation
import Testing
import WaybillAPI
import WaybillClient
import WaybillClientTransports

/// Issue 11 with the real `WaybillClient` against the real server: the receipts the client sends
/// reach the panel, and a write retried with its `Idempotency-Key` is applied once.
@Suite(.timeLimit(.minutes(1)))
struct FieldFeaturesEndToEndTests {
    /// The dispatcher changes an order the driver's app shows; the app refetches and reports it
    /// (SPEC §5 rule 7): the panel's socket gets `order_seen` for the new version and the API says
    /// the driver's device shows it.
    @Test func theDriversAppReportsWhatItShowsAndThePanelHearsOfIt() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let session = try await ClientEndToEndTests.session(server, email: driver.email, password: driver.password)
            #expect(await ClientEndToEndTests.until(session) { session in
                let live = await session.connectionState == .live
                let loaded = await session.orders.isEmpty == false
                return live && loaded
            })
            _ = try await session.detail(OrderID(id))
            let changed = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "Ring twice"])
            let version = try #require(changed.object.int("version"))

            // The first receipt may name the version shown before the change; wait for the new one.
            // A bound for a receipt that never comes, with room for a run that starves the pool.
            let deadline = ContinuousClock.now + .seconds(20)
            var reported: Int64?
            while ContinuousClock.now < deadline, reported != version {
                guard let frame = await ReceiptsTests.nextSeen(panel, timeout: deadline - .now) else { break }
                if frame.int("order_id") == id { reported = (frame["seen"] as? [String: Any])?.int("version") }
            }
            #expect(reported == version)
            let detail = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let seen = try #require(detail.object["seen"] as? [String: Any])
            #expect(seen.int("version") == version && seen.int("driver_id") == driver.id)
            await session.stop()
        }
    }

    /// A driver's action whose answer was lost is sent again with the same key: the server applies
    /// it once and answers the copy from its record (`SavedOrder.isReplay`).
    @Test func aRetriedActionWithItsKeyIsAppliedOnce() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (api, _) = try await HTTPOrdersAPI.logIn(
                server: URL(string: server.baseURL)!, email: driver.email, password: driver.password,
                transport: SocketHTTPTransport())
            let key = "accept-\(id)-e2e"
            let first = try await api.changeStatus(of: OrderID(id), to: .accepted, ifMatch: nil, idempotencyKey: key)
            let retry = try await api.changeStatus(of: OrderID(id), to: .accepted, ifMatch: nil, idempotencyKey: key)
            #expect(!first.isReplay && retry.isReplay)
            #expect(retry.order.version == first.order.version && retry.etag == first.etag)
            let now = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(now.object.string("status") == "accepted")
            #expect(now.object.int("version") == first.order.version)
            // Without the key the same action is a new request: accepted → accepted is refused.
            await #expect(throws: WaybillClientError.self) {
                _ = try await api.changeStatus(of: OrderID(id), to: .accepted, ifMatch: nil, idempotencyKey: nil)
            }
        }
    }
}
