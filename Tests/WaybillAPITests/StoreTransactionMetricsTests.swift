import Foundation
import Testing
import WaybillAPI

/// `waybill_store_transactions_total` counts the store transactions every part of the server runs
/// (the reconnect storm benchmark reads it to report store load).
@Suite(.timeLimit(.minutes(1)))
struct StoreTransactionMetricsTests {
    @Test func readsAndWritesAreCountedByKind() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let start = try await Self.transactions(server)

            #expect(try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken).status == 200)
            let afterRead = try await Self.transactions(server)
            #expect(afterRead.read > start.read)

            let patch = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "counted"])
            #expect(patch.status == 200)
            let afterWrite = try await Self.transactions(server)
            #expect(afterWrite.write > afterRead.write)
        }
    }

    private static func transactions(_ server: TestServer) async throws -> (read: Int, write: Int) {
        let text = try await server.request("GET", "/metrics").text
        func value(_ kind: String) throws -> Int {
            let prefix = "waybill_store_transactions_total{kind=\"\(kind)\"} "
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix(prefix) })
            return try #require(Int(line.dropFirst(prefix.count)))
        }
        return (try value("read"), try value("write"))
    }
}
