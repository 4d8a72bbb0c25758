import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// Records the `alone` each request was started with; answers like `EchoResponder`.
private final class AloneRecorder: HTTPResponder {
    let seen = Mutex<[String: Bool]>([:])
    let echo = EchoResponder()

    func respond(to request: HTTPRequest) async -> HTTPResponse { await echo.respond(to: request) }

    func start(_ request: HTTPRequest, alone: Bool, _ start: () -> Void) {
        seen.withLock { $0[request.path] = alone }
        start()
    }
}

/// `HTTPResponder.start`'s `alone`: no other request is running. A request that is still
/// receiving its body is not running; one whose handler has not answered yet is.
@Suite(.timeLimit(.minutes(1)))
struct AloneTests {
    private static func withRecorder(_ body: (HTTPServer, AloneRecorder) async throws -> Void) async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let recorder = AloneRecorder()
        let server = HTTPServer(configuration: configuration, responder: recorder, webSocketDelegate: nil)
        try server.start()
        do {
            try await body(server, recorder)
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
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
                try c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
                return c
            }
            defer { half.close() }
            try await Task.sleep(for: .milliseconds(100))  // the head is in: the request is in hand
            #expect(try await Self.get(server, "/probe") == 200)
            #expect(recorder.seen.withLock { $0["/probe"] } == true, "a body on its way needs no responder")
            #expect(recorder.seen.withLock { $0["/echo"] } == nil, "the first request was not started")
        }
    }

    @Test func aRequestWhoseHandlerHasNotAnsweredIsRunning() async throws {
        try await Self.withRecorder { (server: HTTPServer, recorder: AloneRecorder) async throws in
            let slow = Task { try await Self.get(server, "/slow") }  // answers after 300 ms
            let started = await eventually { recorder.seen.withLock { $0["/slow"] } != nil }
            #expect(started)
            #expect(try await Self.get(server, "/probe") == 200)
            #expect(recorder.seen.withLock { $0["/slow"] } == true)
            #expect(recorder.seen.withLock { $0["/probe"] } == false, "the slow handler was still running")
            #expect(try await slow.value == 200)
        }
    }
}
