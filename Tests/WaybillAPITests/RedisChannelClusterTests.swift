import Foundation
import Testing
import WaybillAPI
import WaybillNetwork
import WaybillTesting

/// Two deployments on one Redis server: pub/sub channels are server-wide (a `/db` in the URL does
/// not separate them), so each needs its own `--redis-channel`. On one channel, a deployment's
/// events reached the other's sockets (same ids, same driver ids) and then looked like a rewound
/// history there (found by a review, 2026-12-03). Named `…ClusterTests`: it runs with the cluster
/// group, which has `redis-server`.
@Suite(.serialized, .timeLimit(.minutes(2)))
struct RedisChannelClusterTests {
    @Test func deploymentsOnTheirOwnChannelsDoNotHearEachOther() async throws {
        let redis = try RedisServer()
        defer { redis.stop() }
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-channels-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: base) }
        var deployments: [(seed: Seeder.Result, server: ChildProcess, port: Int)] = []
        for name in ["a", "b"] {
            let (seed, server) = try await ExecutableTests.seededServer(
                in: base.appendingPathComponent(name),
                serving: ["--redis-url", redis.url, "--redis-channel", "waybill:\(name)", "--password-iterations", "1000"])
            let port = try #require(await ExecutableTests.port(of: server), "\(server.stderr.suffix(5))")
            deployments.append((seed, server, port))
        }
        defer { for deployment in deployments { deployment.server.terminate() } }
        let (a, b) = (deployments[0], deployments[1])
        let socket = try await TestSocket.open(port: a.port, query: "token=\(a.seed.drivers[0].token)")
        #expect(await socket.next(timeout: .seconds(10))?["type"] as? String == "connected")

        // B's driver (the same id as A's, order 1 in both) accepts B's order: A's socket hears nothing.
        try await Self.accept(b.seed, port: b.port)
        let leaked = await socket.nextEvent(timeout: .seconds(1))
        #expect(leaked == nil, "A's driver got B's event: \(String(describing: leaked))")
        // A's own write still arrives through Redis.
        try await Self.accept(a.seed, port: a.port)
        let own = await socket.nextEvent(timeout: .seconds(10))
        #expect(own?["type"] as? String == "order_status_changed", "\(String(describing: own))")
        await socket.close()
    }

    private static func accept(_ seed: Seeder.Result, port: Int) async throws {
        let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
        let answer = try await HTTPClient.send(
            method: "POST", url: URL(string: "http://127.0.0.1:\(port)/api/orders/\(id)/status")!,
            headers: [("Authorization", "Bearer \(driver.token)"), ("Content-Type", "application/json")],
            body: Array(#"{"status":"accepted"}"#.utf8), timeout: .seconds(10))
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
    }
}
