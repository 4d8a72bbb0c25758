import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillPostgres
import WaybillStorage

/// `Idempotency-Key` across nodes: the record lives in PostgreSQL, so copies of one request sent
/// to two `waybill serve` nodes at once are applied once.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct IdempotencyClusterTests {
    @Test func duplicatesSentToTwoNodesAtOnceAreAppliedOnce() async throws {
        try await TestCluster.withRunning { cluster in
            let boss = try await cluster.seed(drivers: 1, orders: 0).dispatcherToken
            let before = try await cluster.store.read { tx in try tx.newestEventID() }.rawValue
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for index in 0..<10 {
                    group.addTask {
                        // One key in the JSON: the body's bytes are the same on every copy.
                        try await cluster.request(
                            node: index % 2, "POST", "/api/orders/", token: boss, json: ["title": "Across nodes"],
                            headers: ["Idempotency-Key": "cluster-burst"])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let applied = answers.filter { $0.status == 201 && $0.headers["idempotent-replayed"] == nil }
            try #require(applied.count == 1, "\(answers.map(\.status))")
            for answer in answers where answer.headers["idempotent-replayed"] != nil || answer.status != 201 {
                if answer.status == 409 {
                    #expect(answer.errorCode == "idempotency_key_in_use")
                } else {
                    #expect(answer.status == 201)
                    #expect(answer.body == applied[0].body)
                }
            }
            #expect(try await cluster.store.read { tx in try tx.newestEventID() }.rawValue == before + 1)
            // Each node replays the stored answer afterwards.
            for node in 0..<2 {
                let late = try await cluster.request(
                    node: node, "POST", "/api/orders/", token: boss, json: ["title": "Across nodes"],
                    headers: ["Idempotency-Key": "cluster-burst"])
                #expect(late.headers["idempotent-replayed"] == "true")
                #expect(late.body == applied[0].body)
            }
        }
    }
}
