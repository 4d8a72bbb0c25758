import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillPostgres
import WaybillStorage

/// Receipts across nodes (PostgreSQL store, Redis broker): a driver's phone on one node, the
/// dispatcher's panel on the other.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ReceiptsClusterTests {
    @Test func aReceiptOnOneNodeReachesThePanelOnTheOther() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let id = try #require(driver.orderIDs?.first)
            try await cluster.settle()
            let version = try #require(
                try await cluster.request(node: 1, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken).object
                    .int("version"))
            let (panel, _) = try await cluster.socket(node: 1, token: seed.dispatcherToken)
            let (phone, _) = try await cluster.socket(node: 0, token: driver.token)
            await phone.send(#"{"type":"seen","orders":[{"id":\#(id),"version":\#(version)}]}"#)

            let event = try #require(await panel.nextEvent(timeout: .seconds(10)))
            #expect(event["type"] as? String == "order_seen")
            #expect(event.int("order_id") == id)
            #expect((event["seen"] as? [String: Any])?.int("version") == version)
            let detail = try await cluster.request(node: 1, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let seen = try #require(detail.object["seen"] as? [String: Any])
            #expect(seen.int("driver_id") == driver.id && seen.int("version") == version)
            #expect(await phone.nextEvent(timeout: .milliseconds(300)) == nil, "a driver never gets order_seen")
        }
    }
}
