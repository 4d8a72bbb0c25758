import Foundation
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

@testable import WaybillAPI
@testable import WaybillSQLite

/// An order write that reaches an otherwise idle server commits on the service thread
/// (`ServerConfiguration.inlineWrites`, docs/DESIGN.md "Writes on the service thread"), and the
/// service thread still never waits for another process's lock.
@Suite(.timeLimit(.minutes(1)))
struct InlineWritesTests {
    /// Another process's hold on the database's write lock (`BEGIN IMMEDIATE` on a connection of
    /// its own, as `waybill seed` beside the server), let go by `release()` or after 15 s: a server
    /// that waited for it would answer only then. (A fixed 3 s hold was too short for a loaded
    /// 2-core machine running the whole suite.)
    private final class WriteLockHolder: @unchecked Sendable {  // the connection is the thread's after init
        private let connection: SQLiteConnection
        private let released = Atomic<Bool>(false)
        private let letGo = DispatchSemaphore(value: 0), done = DispatchSemaphore(value: 0)

        init(path: String) throws {
            connection = try SQLiteConnection(path: path)
            try connection.execute("BEGIN IMMEDIATE")
            Thread { [self] in
                _ = letGo.wait(timeout: .now() + 15)
                released.store(true, ordering: .sequentiallyConsistent)
                try? connection.execute("COMMIT")
                done.signal()
            }.start()
        }

        deinit { connection.close() }

        var isReleased: Bool { released.load(ordering: .sequentiallyConsistent) }

        /// Lets go and returns once the lock is free.
        func release() async {
            letGo.signal()
            await withCheckedContinuation { c in
                DispatchQueue.global().async {
                    self.done.wait()
                    c.resume()
                }
            }
        }
    }

    private struct Running {
        let sqlite: SQLiteOrderStore
        let server: WaybillServer
        let path: String
        let orderID: Int64
        let companyID: CompanyID
        let token: String

        func send(_ method: String, _ path: String, json: String? = nil) async throws -> Int {
            try await answer(method, path, json: json).status
        }

        func answer(_ method: String, _ path: String, json: String? = nil, key: String? = nil) async throws -> HTTPClient.Response {
            var headers = [("Authorization", "Bearer \(token)")]
            if json != nil { headers.append(("Content-Type", "application/json")) }
            if let key { headers.append(("Idempotency-Key", key)) }
            return try await HTTPClient.send(
                method: method, url: URL(string: "http://127.0.0.1:\(server.port)\(path)")!, headers: headers,
                body: json.map { Array($0.utf8) }, timeout: .seconds(20))
        }

        /// `waybill_http_requests_without_task_total`, read from `/metrics` (a loopback request).
        func answeredWithoutTask() async throws -> Int {
            let text = String(decoding: try await answer("GET", "/metrics").body, as: UTF8.self)
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("waybill_http_requests_without_task_total ") })
            return try #require(Int(line.split(separator: " ").last ?? ""))
        }
    }

    private func withServer(
        inlineWrites: Bool = true, configure: (inout ServerConfiguration) -> Void = { _ in }, _ body: (Running) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-inline-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("i.sqlite").path
        // No checkpoints during the test: each one sends the next write to the writer thread.
        let sqlite = try SQLiteOrderStore(
            path: path, readerCount: 2, busyTimeout: .seconds(60),  // the held lock outlasts 5 s on a stalled runner
            checkpointInterval: .seconds(3600), checkpoint: SQLiteCheckpointer.passive)
        defer { sqlite.close() }
        let seed = try await Seeder(store: sqlite, passwordIterations: 1_000)
            .seed(.init(companyName: "Acme", drivers: 1, ordersPerDriver: 1))
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000
        configuration.inlineWrites = inlineWrites
        configure(&configuration)
        let server = try await WaybillServer.start(
            configuration: configuration, store: sqlite, broker: InProcessBroker(), logger: Logger(sink: { _ in }))
        let running = Running(
            sqlite: sqlite, server: server, path: path, orderID: try #require(seed.drivers[0].orderIDs?.first),
            companyID: CompanyID(seed.companyID), token: seed.dispatcherToken)
        do {
            try await body(running)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    @Test func writesOneAtATimeCommitOnTheServiceThread() async throws {
        try await withServer { s in
            for index in 0..<10 {
                let status = try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"n\#(index)"}"#)
                #expect(status == 200)
            }
            // The seed's last commit was the writer thread's, so every one of these may run inline;
            // a few may still go to the writer (a request of the test client still in hand; on a
            // runner with both cores busy, 6 of 10 once). Without inline commits it is 0.
            #expect(s.sqlite.writerStatistics.inlineTransactions >= 3)
            let order = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(order?.notes == "n9")
        }
    }

    /// An order write run on the service thread is answered there without a Swift task
    /// (`APIResponder.respondNow`), with the same answer as on a task: its detail and `ETag`. Not
    /// under an `Idempotency-Key`, whose claim is a write of its own: that one keeps its task, and
    /// its retry is still the stored answer.
    @Test func anInlineWriteIsAnsweredWithoutATaskAndAKeyedOneWithOne() async throws {
        try await withServer { s in
            let path = "/api/orders/\(s.orderID)/"
            _ = try await s.send("GET", path)  // the token into the cache: a miss goes to the store, on a task
            let before = try await s.answeredWithoutTask()
            var last: HTTPClient.Response?
            for index in 0..<10 {
                last = try await s.answer("PATCH", path, json: #"{"notes":"n\#(index)"}"#)
                #expect(last?.status == 200)
            }
            // As for inline commits above: most, not every one, on a loaded runner.
            #expect(try await s.answeredWithoutTask() - before >= 3)
            let answer = try #require(last)
            let detail = try JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]
            #expect(detail?["notes"] as? String == "n9" && detail?["id"] as? Int == Int(s.orderID))
            let order = try #require(try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) })
            #expect(answer.headers.first { $0.0.lowercased() == "etag" }?.1 == "\"o\(s.orderID)-v\(order.version)-h\(order.versionCheck)\"")

            let keyedBefore = try await s.answeredWithoutTask()
            let keyed = try await s.answer("PATCH", path, json: #"{"notes":"keyed"}"#, key: "inline-key-1")
            let retry = try await s.answer("PATCH", path, json: #"{"notes":"keyed"}"#, key: "inline-key-1")
            #expect(keyed.status == 200 && retry.status == 200 && retry.body == keyed.body)
            #expect(try await s.answeredWithoutTask() == keyedBefore, "a keyed write keeps its task")
            let saved = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(saved?.version == order.version + 1, "the keyed write and its retry: one change")
        }
    }

    /// A write that starts without a task but cannot commit at once (another process holds the
    /// write lock) goes on on a task: answered once the lock is free, written once, and charged to
    /// its user's rate once (three requests in a burst of three all pass; charged twice, the third
    /// was 429). Like the lock tests above it proves nothing on a runner slow enough that the write
    /// arrives after the release, or that the token cache (1 s) or the bucket (1 a second) moves
    /// on meanwhile, and never fails wrongly: each of those only takes another path to the same
    /// answers (`ImmediateAnswerTests` has the charge on a clock that stands still).
    @Test func aWriteThatCannotCommitAtOnceGoesOnOnATask() async throws {
        try await withServer(configure: { $0.userRequestsPerSecond = 1; $0.userRequestBurst = 3 }) { s in
            let path = "/api/orders/\(s.orderID)/"
            #expect(try await s.send("PATCH", path, json: #"{"notes":"before"}"#) == 200)  // the token cached
            let version = try #require(try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }).version
            let lock = try WriteLockHolder(path: s.path)
            let write = Task { try await s.send("PATCH", path, json: #"{"notes":"after"}"#) }
            try await Task.sleep(for: .milliseconds(200))  // in hand, waiting for the lock
            await lock.release()
            #expect(try await write.value == 200)
            let order = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(order?.notes == "after" && order?.version == version + 1)
            #expect(try await s.send("PATCH", path, json: #"{"notes":"third"}"#) == 200, "the third of the burst")
        }
    }

    /// A write with a large body (past 16 KiB) is parsed where its handler runs, so never on the
    /// service thread every socket shares (a 1 MiB body takes about 20 ms to parse).
    @Test func aWriteWithALargeBodyNeverCommitsOnTheServiceThread() async throws {
        try await withServer { s in
            let padding = String(repeating: " ", count: 20 << 10)  // JSON allows it: a 20 KiB body
            for index in 0..<5 {
                let status = try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"n\#(index)"\#(padding)}"#)
                #expect(status == 200)
            }
            #expect(s.sqlite.writerStatistics.inlineTransactions == 0)
            let order = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(order?.notes == "n4")
        }
    }

    @Test func turnedOffEveryWriteGoesToTheWriterThread() async throws {
        try await withServer(inlineWrites: false) { s in
            for index in 0..<5 {
                let status = try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"n\#(index)"}"#)
                #expect(status == 200)
            }
            #expect(s.sqlite.writerStatistics.inlineTransactions == 0)
        }
    }

    /// An order write with a large body is parsed on the pool, not on the writer thread every
    /// company shares: with the writer held (another process holds the write lock and a write
    /// waits for it there), a large malformed body is still answered 400 at once. It was parsed on
    /// the writer thread, about 20 ms a MiB (a review, 2026-12-05).
    @Test func aLargeBodyIsParsedOffTheWriterThread() async throws {
        try await withServer { s in
            let lock = try WriteLockHolder(path: s.path)
            let write = Task { try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"held"}"#) }
            // The writer thread waits for the lock (on a runner slower than this the test proves
            // nothing, but never fails wrongly).
            try await Task.sleep(for: .milliseconds(500))
            let padding = String(repeating: " ", count: 20 << 10)
            let status = try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: "{\"notes\": " + padding)  // cut off: malformed
            let answeredBeforeRelease = !lock.isReleased
            #expect(status == 400)
            #expect(answeredBeforeRelease, "the large body was parsed while the writer thread waited")
            await lock.release()
            #expect(try await write.value == 200)
        }
    }

    /// Another process holds the database's write lock (`waybill seed` beside the server): the
    /// write waits for it on the writer thread, and the server answers other requests meanwhile.
    @Test func aWriteWaitingForAnotherProcessDoesNotHoldTheServer() async throws {
        try await withServer { s in
            #expect(try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"before"}"#) == 200)
            let lock = try WriteLockHolder(path: s.path)
            let write = Task { try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"after"}"#) }
            try await Task.sleep(for: .milliseconds(200))  // the write is in hand, waiting for the lock
            #expect(try await s.send("GET", "/healthz") == 200)
            #expect(try await s.send("GET", "/api/orders/\(s.orderID)/") == 200)
            let answeredBeforeRelease = !lock.isReleased
            #expect(answeredBeforeRelease, "answered while the write still waited for the lock")
            await lock.release()
            #expect(try await write.value == 200)
            let order = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(order?.notes == "after")
        }
    }

    /// A write whose commit the disk refuses (a full disk) is answered 503, never 200, on the
    /// service thread's inline path as on the writer's, and the next write goes on from the
    /// version before it (`SQLiteFailedCommitTests` has the store's side).
    @Test func aWriteTheDiskRefusesIsAnswered503AndTheNextOneGoesOn() async throws {
        try await withServer { s in
            #expect(try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"before"}"#) == 200)
            let before = try #require(try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) })
            #expect(s.sqlite.failNextWALFlush())
            #expect(try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"refused"}"#) == 503)
            #expect(try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) } == before)
            #expect(try await s.send("PATCH", "/api/orders/\(s.orderID)/", json: #"{"notes":"after"}"#) == 200)
            let after = try await s.sqlite.read { tx in try tx.order(OrderID(s.orderID), in: s.companyID) }
            #expect(after?.notes == "after")
            #expect(after?.version == before.version + 1)
        }
    }
}
