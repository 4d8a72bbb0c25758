import Foundation
import Synchronization
import Testing
import WaybillAPI
import WaybillBroker
import WaybillObservability
import WaybillSQLite
import WaybillDomain
import WaybillStorage
import WaybillTesting

import WaybillNetwork

/// Boots the real server on port 0 with a SQLite file in a fresh temporary directory (like
/// Hummingbird's `.live` test mode), and speaks HTTP to it as a client would.
final class TestServer: @unchecked Sendable {  // `server` changes only in `restart`, which tests call serially
    let directory: URL
    let logs = LogCapture()
    let configuration: ServerConfiguration
    let broker: any Broker
    /// The server's wall clock (tests that must not depend on how fast the machine is fix it).
    let clock: any WallClock
    /// Opens the SQLite file (tests may open it with a test seam, e.g. failing checkpoints).
    let openStore: @Sendable (String) throws -> SQLiteOrderStore
    private(set) var store: SQLiteOrderStore
    private(set) var server: WaybillServer

    var port: Int { server.port }
    var baseURL: String { "http://127.0.0.1:\(port)" }

    private init(
        configuration: ServerConfiguration, broker: any Broker, directory: URL, clock: any WallClock,
        openStore: @escaping @Sendable (String) throws -> SQLiteOrderStore
    ) async throws {
        self.configuration = configuration
        self.broker = broker
        self.clock = clock
        self.directory = directory
        self.openStore = openStore
        let path = directory.appendingPathComponent("waybill.sqlite").path
        // Opening (threads started, WAL, migrations) and closing (threads joined, last checkpoint)
        // block: off the cooperative pool, which has two threads on a 2-core machine for every
        // test in the process.
        store = try await runBlocking { try openStore(path) }
        server = try await WaybillServer.start(
            configuration: configuration, store: store, broker: broker, logger: Logger(sink: logs.sink), clock: clock)
    }

    /// Runs `body` against a fresh server, then shuts it down and deletes its data.
    static func withRunning<T>(
        broker: any Broker = InProcessBroker(), clock: any WallClock = SystemWallClock(),
        configure: (inout ServerConfiguration) -> Void = { _ in },
        openStore: @escaping @Sendable (String) throws -> SQLiteOrderStore = { try SQLiteOrderStore(path: $0) },
        _ body: (TestServer) async throws -> T
    ) async throws -> T {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000  // fast tests; production default is 210,000
        configuration.relayPollInterval = .milliseconds(200)
        // A check refused for waiting 1 s is right in production, but a stalled test runner makes
        // it happen to checks a test expects to run (the expiry itself: KeyStretchingPoolTests).
        configuration.keyStretchingMaxWait = .seconds(30)
        configure(&configuration)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-test-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let server = try await TestServer(
            configuration: configuration, broker: broker, directory: directory, clock: clock, openStore: openStore)
        do {
            let result = try await body(server)
            await server.stop()
            return result
        } catch {
            await server.stop()
            throw error
        }
    }

    /// Stops the server and opens a new one on the same data file and (if free) port.
    func restart() async throws {
        await stopServer()
        try await startServer()
    }

    /// Stops the server (sockets get 1001); the store stays open for writes "while it is down".
    func stopServer() async {
        stoppedPort = server.port
        await server.shutdown()
    }

    /// Starts a server again on the same port, with a freshly opened store on the same file.
    func startServer() async throws {
        let (closing, path, openStore) = (store, directory.appendingPathComponent("waybill.sqlite").path, openStore)
        store = try await runBlocking {
            closing.close()
            return try openStore(path)
        }
        var configuration = self.configuration
        configuration.port = stoppedPort ?? server.port
        server = try await WaybillServer.start(
            configuration: configuration, store: store, broker: broker, logger: Logger(sink: logs.sink), clock: clock)
    }

    private var stoppedPort: Int?

    /// A backup of the data as it is now, as an operator takes one: the server restarts around it
    /// (its sockets get 1001 and resume), so the file is whole. Returns the copy's path.
    func backUp() async throws -> URL {
        await stopServer()
        let (closing, path, openStore) = (store, directory.appendingPathComponent("waybill.sqlite").path, openStore)
        let copy = directory.appendingPathComponent("backup-\(UUID().uuidString).sqlite")
        store = try await runBlocking {
            closing.close()  // the last checkpoint: everything is in the main file
            try FileManager.default.copyItem(atPath: path, toPath: copy.path)
            return try openStore(path)
        }
        try await startServer()
        return copy
    }

    /// While the server is stopped: the data file is replaced by `backup`, as a restore does
    /// (every commit since the backup is lost). The store is open again for writes afterwards.
    func restoreData(from backup: URL) async throws {
        let (closing, path, openStore) = (store, directory.appendingPathComponent("waybill.sqlite").path, openStore)
        store = try await runBlocking {
            closing.close()
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            try FileManager.default.copyItem(atPath: backup.path, toPath: path)
            return try openStore(path)
        }
    }

    /// The newest event id the store has committed.
    func newestEventID() async throws -> Int64 {
        try await store.read { tx in try tx.newestEventID() }.rawValue
    }

    /// Changes an order's notes straight through the store, with its outbox event, as a second
    /// process on the same data file would (used while the server is down).
    func writeNotesDirectly(order id: Int64, company: Int64, notes: String) async throws {
        try await store.write { tx in
            guard let before = try tx.order(OrderID(id), in: CompanyID(company)) else { throw StoreError.notFound }
            var after = before
            after.notes = notes
            after.version += 1
            after.updatedAt = Date()
            let saved = try tx.updateOrder(after)
            _ = try tx.appendEvents(Broadcaster.events(for: .updated(before: before, after: saved), at: Date()))
        }
    }

    private func stop() async {
        await server.shutdown()
        let (store, directory) = (store, directory)
        _ = try? await runBlocking {
            store.close()
            try? FileManager.default.removeItem(at: directory)
        }
    }

    /// A company with a dispatcher and drivers (each with `orders` assigned orders).
    /// Returns once the hub has delivered the seed's own `order_created` events, so sockets opened
    /// afterwards start after them.
    func seed(drivers: Int = 2, orders: Int = 1, company: String = "Acme") async throws -> Seeder.Result {
        let result = try await Seeder(store: store, passwordIterations: 1_000).seed(
            .init(companyName: company, drivers: drivers, ordersPerDriver: orders))
        try #require(try await server.waitUntilDelivered())
        return result
    }

    /// Polls `condition` every 20 ms until it holds or `timeout` passes (`WaybillTesting.eventually`).
    func eventually(timeout: Duration = .seconds(20), _ condition: () async throws -> Bool) async rethrows -> Bool {
        try await WaybillTesting.eventually(timeout: timeout, poll: .milliseconds(20), condition)
    }

    // MARK: HTTP

    func request(
        _ method: String, _ path: String, token: String? = nil, json: Any? = nil, body: Data? = nil,
        headers: [String: String] = [:]
    ) async throws -> TestResponse {
        var fields: [(String, String)] = []
        if let token { fields.append(("Authorization", "Bearer \(token)")) }
        var payload = body.map(Array.init)
        if let json {
            payload = Array(try JSONSerialization.data(withJSONObject: json))
            fields.append(("Content-Type", "application/json"))
        }
        fields += headers.map { ($0.key, $0.value) }
        // Not URLSession: cancelling a task inside it can deadlock on Linux (see HTTPClient).
        let answer = try await HTTPClient.send(
            method: method, url: URL(string: baseURL + path)!, headers: fields, body: payload, timeout: .seconds(30))
        return TestResponse(status: answer.status, headers: answer.headers, body: Data(answer.body))
    }
}

/// An HTTP answer with helpers for the JSON in it.
struct TestResponse {
    var status: Int
    var headers: [String: String]
    var body: Data

    var json: Any? { try? JSONSerialization.jsonObject(with: body) }
    var object: [String: Any] { json as? [String: Any] ?? [:] }
    var array: [[String: Any]] { json as? [[String: Any]] ?? [] }
    var errorCode: String? { object["error"] as? String }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Collects log lines so tests can check what was (not) logged.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var sink: @Sendable (String) -> Void { { line in self.lines.withLock { $0.append(line) } } }
    var all: [String] { lines.withLock { $0 } }
    func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }
}

extension Dictionary where Key == String, Value == Any {
    func int(_ key: String) -> Int64? { (self[key] as? NSNumber)?.int64Value }
    func string(_ key: String) -> String? { self[key] as? String }
}
