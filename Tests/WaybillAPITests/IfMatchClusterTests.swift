import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillPostgres
import WaybillStorage

/// `If-Match` across nodes: the check runs in the write's transaction after the order's row is
/// locked in PostgreSQL (its turn and its read, `FOR UPDATE`), so two nodes cannot both pass the
/// same tag. Without both locks two of these writes went through. IfMatchTests has the one-node
/// case on SQLite.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct IfMatchClusterTests {
    @Test func writesWithTheSameTagOnTwoNodesAtOnceLetExactlyOneThrough() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let tag = "\"o\(id)-v1\""
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for n in 0..<8 {
                    group.addTask {
                        try await cluster.request(
                            node: n % 2, "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "writer \(n)"],
                            headers: ["If-Match": tag])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let statuses = answers.map(\.status)
            #expect(statuses.filter { $0 == 200 }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == 412 }.count == 7, "\(statuses)")
            for node in 0..<2 {
                let detail = try await cluster.request(node: node, "GET", "/api/orders/\(id)/", token: boss)
                #expect(detail.object.int("version") == 2)
            }
        }
    }
}
