import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// Runs the jobs enqueued while `capture` runs on the calling thread, right after it (as
/// `WriterExecutor.runHere` does for an order write); other jobs on Dispatch's pool.
private final class CapturingExecutor: TaskExecutor, @unchecked Sendable {  // `capturing`, `captured` under `lock`
    private let lock = NSLock()
    private var capturing = false
    private var captured: [UnownedJob] = []

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        lock.lock()
        if capturing {
            captured.append(job)
            lock.unlock()
            return
        }
        lock.unlock()
        let executor = asUnownedTaskExecutor()
        DispatchQueue.global().async { job.runSynchronously(on: executor) }
    }

    func capture(_ body: () -> Void) {
        lock.lock()
        capturing = true
        lock.unlock()
        body()
        lock.lock()
        capturing = false
        let jobs = captured
        captured = []
        lock.unlock()
        for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
    }
}

/// Records the `alone` each request was started with, and answers an `alone` request inside
/// `start` (its task runs on the calling thread), like an order write on an idle SQLite writer.
private final class AloneRecorder: HTTPResponder {
    let seen = Mutex<[String: Bool]>([:])
    let echo = EchoResponder()
    let executor = CapturingExecutor()
    /// `/held` answers once this is set (or after 20 s): a handler that runs as long as the test needs.
    let letHeldAnswer = Atomic<Bool>(false)

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        if request.path == "/held" {
            let deadline = ContinuousClock.now + .seconds(20)
            while !letHeldAnswer.load(ordering: .relaxed), ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(5))
            }
            return HTTPResponse(status: 200, body: Array("held".utf8))
        }
        return await echo.respond(to: request)
    }

    func executor(for request: HTTPRequest) -> (any TaskExecutor)? { executor }

    func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void) {
        seen.withLock { $0[request.path] = alone }
        if alone { executor.capture { start(false) } } else { start(false) }
    }
}

/// `HTTPResponder.start`'s `alone`: no other request is running. A request still receiving its
/// body is not running; one whose handler has not answered is. Answers given inline in the same
/// loop pass do not count, up to `inlineAnswersPerPass`.
@Suite(.timeLimit(.minutes(1)))
struct AloneTests {
    /// `withServer` keeps idle connections for 60 s: the warm connections of the burst test sit
    /// idle while the test sets up, and on a stalled CI runner the 5 s default closed one before
    /// its request (`.closed`, 2026-12-04).
    private static func withRecorder(_ body: (HTTPServer, AloneRecorder) async throws -> Void) async throws {
        let recorder = AloneRecorder()
        try await withServer(responder: recorder) { server in try await body(server, recorder) }
    }

    private static func get(_ server: HTTPServer, _ path: String) async throws -> Int {
        try await HTTPClient.send(
            method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)\(path)")!, headers: [], body: nil,
            timeout: .seconds(20)
        ).status
    }

    @Test func aRequestStillReceivingItsBodyLeavesTheNextOneAlone() async throws {
        try await Self.withRecorder { server, recorder in
            let port = server.port
            let half = try await runBlocking {
                let c = try RawConnection(port: port, timeout: .seconds(20))
                try c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
                // The server has read the head once it asks for the body.
                let line = try c.readLine()
                _ = try c.readLine()
                return (c, line)
            }
            defer { half.0.close() }
            #expect(half.1.hasPrefix("HTTP/1.1 100"), "\(half.1)")
            #expect(try await Self.get(server, "/probe") == 200)
            #expect(recorder.seen.withLock { $0["/probe"] } == true, "a body on its way needs no responder")
            #expect(recorder.seen.withLock { $0["/echo"] } == nil, "the first request was not started")
        }
    }

    @Test func aRequestWhoseHandlerHasNotAnsweredIsRunning() async throws {
        try await Self.withRecorder { (server: HTTPServer, recorder: AloneRecorder) async throws in
            // Held until the probe is answered (a 3 s handler once could end first on a stalled runner).
            let slow = Task { try await Self.get(server, "/held") }
            let started = await eventually { recorder.seen.withLock { $0["/held"] } != nil }
            #expect(started)
            #expect(try await Self.get(server, "/probe") == 200)
            #expect(recorder.seen.withLock { $0["/probe"] } == false, "the held handler was still running")
            recorder.letHeldAnswer.store(true, ordering: .relaxed)
            #expect(try await slow.value == 200)
        }
    }

    /// Three requests read in one loop pass (the service thread was held while they arrived):
    /// the first two are answered inline, the third goes to its executor.
    @Test func aBurstReadInOnePassIsAnsweredInlineOnlyUpToTheCap() async throws {
        try await Self.withRecorder { server, recorder in
            let port = server.port
            let connections = try await runBlocking {
                try (0..<3).map { _ in
                    let c = try RawConnection(port: port, timeout: .seconds(20))
                    try c.send(RawConnection.request("GET", "/warm"))  // accepted and served: open
                    _ = try c.readResponse()
                    return c
                }
            }
            defer { for c in connections { c.close() } }
            // lws re-enables reading a kept-alive connection lazily, at its next writeable pass
            // (after `lws_rx_flow_control`); until then a request on it is not seen. Three passes
            // of the loop let every warm connection get there, or the burst may be read in two
            // passes (failed about one run in four with libev).
            for _ in 0..<3 {
                let passed = DispatchSemaphore(value: 0)
                server.execute { _ in passed.signal() }
                try await runBlocking { passed.wait() }
            }
            let held = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            server.execute { _ in
                held.signal()
                release.wait()  // the service thread reads nothing until the three are sent
            }
            let answers = try await runBlocking {
                held.wait()
                for (index, c) in connections.enumerated() { try c.send(RawConnection.request("GET", "/burst\(index)")) }
                Thread.sleep(forTimeInterval: 0.2)  // the client's pace: let the bytes reach the server's sockets
                release.signal()
                return try connections.map { try $0.readResponse().status }
            }
            #expect(answers == [200, 200, 200])
            let alone = recorder.seen.withLock { seen in (0..<3).compactMap { seen["/burst\($0)"] } }
            #expect(alone.count == 3)
            #expect(alone.filter { $0 }.count == 2, "\(alone)")
        }
    }
}
