import Foundation
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillSQLite
import WaybillStorage
import WaybillTesting

@testable import WaybillAPI

@testable import WaybillAPI

/// Counts the task jobs it is given and runs them on the store's own writer executor.
private final class CountingExecutor: WriterExecutor {
    let base: any WriterExecutor
    let jobs = Atomic<Int>(0)
    init(base: any WriterExecutor) { self.base = base }
    func observeBatches(_ observer: @escaping @Sendable (WriterBatchPoint) -> Void) -> Bool { base.observeBatches(observer) }
    func stopObservingBatches() { base.stopObservingBatches() }
    func enqueue(_ job: consuming ExecutorJob) {
        jobs.add(1, ordering: .sequentiallyConsistent)
        base.enqueue(job)
    }
}

/// A SQLite store whose writer executor is counted.
private final class CountedWriterStore: OrderStore {
    let base: SQLiteOrderStore
    let executor: CountingExecutor
    init(_ base: SQLiteOrderStore) throws {
        self.base = base
        executor = CountingExecutor(base: try #require(base.writerExecutor))
    }
    func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T { try await base.read(body) }
    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T { try await base.write(body) }
    func close() { base.close() }
    func lease(_ name: String) -> any Lease { base.lease(name) }
    var health: StoreHealth { base.health }
    func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool { base.observeCommits(observer) }
    func stopObservingCommits() { base.stopObservingCommits() }
    var writerExecutor: (any WriterExecutor)? { executor }
}

/// Order writes run on the store's writer thread (`OrderStore.writerExecutor`); reads, logins and
/// everything else stay on Swift's pool.
@Suite(.timeLimit(.minutes(1)))
struct WriterExecutorRoutingTests {
    @Test func onlyOrderWritesGoToTheWriterExecutor() {
        #expect(APIResponder.isOrderWrite(method: "PATCH", path: "/api/orders/7/"))
        #expect(APIResponder.isOrderWrite(method: "POST", path: "/api/orders/"))
        #expect(APIResponder.isOrderWrite(method: "POST", path: "/api/orders/7/stages/3/complete"))
        #expect(APIResponder.isOrderWrite(method: "DELETE", path: "/api/orders/7/"))
        #expect(!APIResponder.isOrderWrite(method: "GET", path: "/api/orders/7/"))
        #expect(!APIResponder.isOrderWrite(method: "HEAD", path: "/api/orders/"))
        #expect(!APIResponder.isOrderWrite(method: "POST", path: "/api/auth/login"))
        #expect(!APIResponder.isOrderWrite(method: "POST", path: "/api/ws-ticket"))
        // Compared as bytes, yet by characters as `hasPrefix` did: a combining mark after the
        // prefix makes another character, not `orders`.
        #expect(APIResponder.isOrderWrite(method: "POST", path: "/api/orders"))
        #expect(!APIResponder.isOrderWrite(method: "POST", path: "/api/orders\u{301}/7/"))
        #expect(!APIResponder.isOrderWrite(method: "POST", path: "/api/order"))
    }

    @Test func aPatchRunsOnTheWriterExecutorAndAGetDoesNot() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-writer-exec-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sqlite = try SQLiteOrderStore(path: directory.appendingPathComponent("w.sqlite").path)
        defer { sqlite.close() }
        let store = try CountedWriterStore(sqlite)
        let seed = try await Seeder(store: sqlite, passwordIterations: 1_000)
            .seed(.init(companyName: "Acme", drivers: 1, ordersPerDriver: 1))
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000
        let server = try await WaybillServer.start(
            configuration: configuration, store: store, broker: InProcessBroker(), logger: Logger(sink: { _ in }))
        defer { Task { await server.shutdown() } }
        let id = try #require(seed.drivers[0].orderIDs?.first)
        func send(_ method: String, _ path: String, json: String? = nil) async throws -> Int {
            var headers = [("Authorization", "Bearer \(seed.dispatcherToken)")]
            if json != nil { headers.append(("Content-Type", "application/json")) }
            return try await HTTPClient.send(
                method: method, url: URL(string: "http://127.0.0.1:\(server.port)\(path)")!, headers: headers,
                body: json.map { Array($0.utf8) }, timeout: .seconds(10)).status
        }
        #expect(try await send("GET", "/api/orders/\(id)/") == 200)
        #expect(store.executor.jobs.load(ordering: .sequentiallyConsistent) == 0, "a read stays on the pool")
        #expect(try await send("PATCH", "/api/orders/\(id)/", json: #"{"notes":"on the writer"}"#) == 200)
        let afterPatch = store.executor.jobs.load(ordering: .sequentiallyConsistent)
        #expect(afterPatch >= 2, "the handler starts there and resumes there after its commit")
        #expect(try await send("GET", "/api/orders/\(id)/") == 200)
        #expect(store.executor.jobs.load(ordering: .sequentiallyConsistent) == afterPatch)
        let order = try await sqlite.read { tx in try tx.order(OrderID(id), in: CompanyID(seed.companyID)) }
        #expect(order?.notes == "on the writer")
        await server.shutdown()
    }

    /// The store outlives its server: a stopped server lets go of the store's commit and batch
    /// observers, so it is not kept alive by them and the next server on the store gets both; a
    /// second `shutdown` of the first server leaves the next one's alone.
    @Test func aStoppedServerLetsGoOfTheStoresObservers() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-observers-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sqlite = try SQLiteOrderStore(path: directory.appendingPathComponent("o.sqlite").path)
        defer { sqlite.close() }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000
        let server = try await WaybillServer.start(
            configuration: configuration, store: sqlite, broker: InProcessBroker(), logger: Logger(sink: { _ in }))
        let executor = try #require(sqlite.writerExecutor)
        #expect(!sqlite.observeCommits { _ in }, "the running server observes commits (the local path)")
        #expect(!executor.observeBatches { _ in }, "and the writer's batches")
        await server.shutdown()
        let second = try await WaybillServer.start(
            configuration: configuration, store: sqlite, broker: InProcessBroker(), logger: Logger(sink: { _ in }))
        await server.shutdown()  // again: must not take the second server's observers away
        #expect(!sqlite.observeCommits { _ in }, "the next server took the local path, and keeps it")
        #expect(!executor.observeBatches { _ in })
        await second.shutdown()
        #expect(sqlite.observeCommits { _ in })
        #expect(executor.observeBatches { _ in })
    }

    /// A server that has shut down is freed, with all it holds (the hub and its tables, the token
    /// cache, the router): its network core and its loop, the hub and the HTTP server, and the
    /// metrics and the HTTP server held each other, and an embedder or a test that started servers
    /// one after another kept every one of them in memory.
    @Test func aServerThatShutDownIsFreed() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-freed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let sqlite = try SQLiteOrderStore(path: directory.appendingPathComponent("f.sqlite").path)
        defer { sqlite.close() }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000
        final class Weak: @unchecked Sendable {  // read after the server is gone
            weak var object: AnyObject?
            init(_ object: AnyObject) { self.object = object }
        }
        var parts: [Weak] = []
        do {
            let server = try await WaybillServer.start(
                configuration: configuration, store: sqlite, broker: InProcessBroker(), logger: Logger(sink: { _ in }))
            parts = server.parts.map(Weak.init)
            let answer = try await HTTPClient.send(
                method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/healthz")!, timeout: .seconds(10))
            #expect(answer.status == 200)
            await server.shutdown()
        }
        let held = parts
        #expect(await eventually(timeout: .seconds(10)) { held.allSatisfy { $0.object == nil } })
        #expect(held.map { $0.object.map { String(describing: type(of: $0)) } ?? "freed" } == ["freed", "freed", "freed"])
    }
}
