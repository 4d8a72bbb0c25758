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

    /// A record written through one node answers on the other: a stored refusal is replayed there
    /// (even once the request would now succeed), and the key reused for another request is 422
    /// there, both changing nothing. IdempotencyTests has each rule on one SQLite node.
    @Test func aStoredRefusalAndAReusedKeyAnswerAlikeOnTheOtherNode() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let path = "/api/orders/\(id)/status", key = ["Idempotency-Key": "start-\(id)"]
            let refused = try await cluster.request(
                node: 0, "POST", path, token: driver.token, json: ["status": "in_progress"], headers: key)
            #expect(refused.status == 409 && refused.errorCode == "invalid_transition", "\(refused.status)")
            let accepted = try await cluster.request(node: 1, "POST", path, token: driver.token, json: ["status": "accepted"])
            #expect(accepted.status == 200)
            let version = try #require(accepted.object.int("version"))
            let events = try await cluster.store.read { tx in try tx.newestEventID() }.rawValue

            // A refusal's answer is stored just after it is sent (`IdempotencyGuard`): until then the
            // key is in use (409 `idempotency_key_in_use`), and the repeat is asked again.
            var again = try await cluster.request(
                node: 1, "POST", path, token: driver.token, json: ["status": "in_progress"], headers: key)
            let deadline = ContinuousClock.now + .seconds(10)
            while again.errorCode == "idempotency_key_in_use", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
                again = try await cluster.request(
                    node: 1, "POST", path, token: driver.token, json: ["status": "in_progress"], headers: key)
            }
            #expect(again.status == 409, "without the record this would start the order: \(again.status)")
            #expect(again.body == refused.body)
            #expect(again.headers["idempotent-replayed"] == "true")
            let reused = try await cluster.request(
                node: 1, "POST", path, token: driver.token, json: ["status": "accepted"], headers: key)
            #expect(reused.status == 422 && reused.errorCode == "idempotency_key_reused", "\(reused.status)")
            let elsewhere = try await cluster.request(
                node: 0, "PATCH", "/api/orders/\(id)/", token: driver.token, json: ["notes": "gate 4"], headers: key)
            #expect(elsewhere.status == 422 && elsewhere.errorCode == "idempotency_key_reused", "\(elsewhere.status)")

            #expect(try await cluster.store.read { tx in try tx.newestEventID() }.rawValue == events)
            for node in 0..<2 {
                let now = try await cluster.request(node: node, "GET", "/api/orders/\(id)/", token: driver.token)
                #expect(now.object.int("version") == version)
                #expect(now.object.string("status") == "accepted")
            }
        }
    }
}
