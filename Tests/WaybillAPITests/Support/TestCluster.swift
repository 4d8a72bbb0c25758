import Foundation
import Testing
import WaybillAPI
import WaybillNetwork
import WaybillPostgres
import WaybillTesting

/// Real processes, as production runs them: a PostgreSQL and a Redis of the test's own, and
/// `waybill serve` nodes (the built executable) on both. Tests kill and restart any of them.
///
/// Each node is a child process on a port it picked itself (`--port 0`); clients talk to a node
/// directly (the load balancer's only job, choosing a node, is the test's here).
final class TestCluster: @unchecked Sendable {  // mutated only by the test body, serially
    let postgres: PostgresServer
    let redis: RedisServer
    let databaseURL: String
    let directory: URL
    private(set) var nodes: [ChildProcess?] = []
    private(set) var ports: [Int] = []
    /// Seeding and direct checks go through a store of the test's own on the same database.
    let store: PostgresOrderStore

    private init(postgres: PostgresServer, redis: RedisServer, databaseURL: String) throws {
        self.postgres = postgres
        self.redis = redis
        self.databaseURL = databaseURL
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-cluster-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // 10 s per connect: this store only seeds and checks, and a busy 2-core runner once took
        // more than the product's 2 s to accept a connection (WaybillStoreConformanceTests).
        store = try PostgresOrderStore(url: databaseURL, applicationName: "waybill-test", connectTimeout: .seconds(10))
    }

    /// Runs `body` against `nodeCount` nodes on a fresh PostgreSQL and Redis, then stops everything.
    ///
    /// Starting and stopping servers blocks (initdb, pg_ctl): it runs on threads of its own, never
    /// on the two cooperative threads the rest of the test process needs.
    static func withRunning<T>(nodes nodeCount: Int = 2, _ body: (TestCluster) async throws -> T) async throws -> T {
        // Their own servers, not the shared test ones: these tests stop and kill them.
        let cluster = try await runBlocking { () throws -> TestCluster in
            let postgres = try PostgresServer()
            do {
                let redis = try RedisServer()
                do {
                    return try TestCluster(postgres: postgres, redis: redis, databaseURL: try postgres.createDatabase())
                } catch {
                    redis.stop()
                    throw error
                }
            } catch {
                postgres.remove()
                throw error
            }
        }
        do {
            // Started together: the nodes must agree on migrating the schema once.
            try await cluster.startNodes(count: nodeCount)
            let result = try await body(cluster)
            try await runBlocking { cluster.stopAll() }
            return result
        } catch {
            try await runBlocking { cluster.stopAll() }
            throw error
        }
    }

    // MARK: Nodes

    func startNodes(count: Int) async throws {
        let started = try (0..<count).map { index in try launch(index) }
        nodes = started
        ports = Array(repeating: 0, count: count)
        for index in 0..<count { try await waitUntilReady(index) }
    }

    /// Starts one more node, on `redisURL` instead of the cluster's Redis if given (e.g. a port
    /// nothing listens on); returns its index once it answers `/readyz`.
    func startNode(redisURL: String? = nil) async throws -> Int {
        let index = nodes.count
        nodes.append(try launch(index, redisURL: redisURL))
        ports.append(0)
        try await waitUntilReady(index)
        return index
    }

    private func launch(_ index: Int, redisURL: String? = nil) throws -> ChildProcess {
        try ChildProcess([
            "serve", "--port", "0", "--node-id", "node\(index + 1)", "--database-url", databaseURL,
            "--redis-url", redisURL ?? redis.url, "--password-iterations", "1000",
        ])
    }

    private func waitUntilReady(_ index: Int) async throws {
        guard let node = nodes[index] else { return }
        let port = try #require(await ExecutableTests.port(of: node), "node\(index + 1) did not start: \(node.stderr.suffix(5))")
        ports[index] = port
        let ready = await eventually(timeout: .seconds(20)) {
            (try? await self.request(node: index, "GET", "/readyz").status) == 200
        }
        try #require(ready, "node\(index + 1) never became ready")
    }

    /// SIGKILL: no goodbye to its sockets, no lease released (the database notices the session end).
    func kill(node index: Int) async {
        nodes[index]?.signal(SIGKILL)
        _ = await nodes[index]?.exitStatus(timeout: .seconds(5))
        nodes[index] = nil
    }

    /// SIGSTOP: the node keeps its connections open and answers nothing (a stalled VM, a GC pause,
    /// a debugger); `thaw` lets it go on.
    func freeze(node index: Int) { nodes[index]?.signal(SIGSTOP) }
    func thaw(node index: Int) { nodes[index]?.signal(SIGCONT) }

    /// SIGTERM, as a deploy does: the node closes its sockets with 1001 and releases its leases.
    func terminate(node index: Int) async {
        nodes[index]?.signal(SIGTERM)
        _ = await nodes[index]?.exitStatus(timeout: .seconds(15))
        nodes[index] = nil
    }

    /// Whether node `index` logged a line containing `text` (stdout or stderr).
    func logged(node index: Int, _ text: String) -> Bool {
        guard let node = nodes[index] else { return false }
        return (node.stdout + node.stderr).contains { $0.contains(text) }
    }

    /// Blocking: call through `runBlocking`.
    func stopAll() {
        for node in nodes { node?.signal(SIGKILL) }
        store.close()
        redis.stop()
        postgres.remove()
        try? FileManager.default.removeItem(at: directory)
    }

    // MARK: Data

    func seed(drivers: Int = 2, orders: Int = 1, company: String = "Acme") async throws -> Seeder.Result {
        try await Seeder(store: store, passwordIterations: 1_000).seed(
            .init(companyName: company, drivers: drivers, ordersPerDriver: orders))
    }

    // MARK: Clients

    func request(
        node index: Int, _ method: String, _ path: String, token: String? = nil, json: Any? = nil,
        headers: [String: String] = [:], timeout: Duration = .seconds(30)
    ) async throws -> TestResponse {
        var fields: [(String, String)] = []
        if let token { fields.append(("Authorization", "Bearer \(token)")) }
        var payload: [UInt8]?
        if let json {
            payload = Array(try JSONSerialization.data(withJSONObject: json))
            fields.append(("Content-Type", "application/json"))
        }
        fields += headers.map { ($0.key, $0.value) }
        let answer = try await HTTPClient.send(
            method: method, url: URL(string: "http://127.0.0.1:\(ports[index])\(path)")!, headers: fields, body: payload,
            timeout: timeout)
        return TestResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }

    /// A socket on `node`, after its `connected` frame.
    func socket(node index: Int, token: String, query extra: String = "") async throws -> (TestSocket, JSONFrame) {
        let socket = try await TestSocket.open(port: ports[index], query: "token=\(token)" + (extra.isEmpty ? "" : "&\(extra)"))
        let connected = try #require(await socket.next(timeout: .seconds(10)))
        try #require(connected["type"] as? String == "connected", "expected connected, got \(connected)")
        return (socket, connected)
    }

    /// Polls `condition` every 50 ms until it holds or `timeout` passes.
    func eventually(timeout: Duration = .seconds(10), _ condition: () async throws -> Bool) async rethrows -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if try await condition() { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return try await condition()
    }
}
