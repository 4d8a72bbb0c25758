import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// Starts every request's task at once (`start(true)`) and records, right after `start`
/// returns, whether the handler had already run, and on which thread.
private final class ImmediateRecorder: HTTPResponder {
    /// (ran inside `start`, on the thread that called `start`), by path.
    let seen = Mutex<[String: (ranInside: Bool, sameThread: Bool)]>([:])
    private let ran = Mutex<[String: UInt]>([:])

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        ran.withLock { $0[request.path] = UInt(pthread_self()) }
        return HTTPResponse(status: 200, body: Array("now".utf8))
    }

    func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void) {
        let caller = UInt(pthread_self())
        start(true)
        let thread = ran.withLock { $0[request.path] }
        seen.withLock { $0[request.path] = (thread != nil, thread == caller) }
    }
}

/// `HTTPResponder.start`'s `start(true)`: the server starts the request's task at once on the
/// calling thread (`Task.immediate`), so a handler that never suspends has answered before
/// `start` returns, without a job through an executor's queue.
@Suite(.timeLimit(.minutes(1)))
struct ImmediateStartTests {
    @Test func aTaskStartedAtOnceRunsBeforeStartReturnsOnTheCallingThread() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let recorder = ImmediateRecorder()
        let server = HTTPServer(configuration: configuration, responder: recorder, webSocketDelegate: nil)
        try server.start()
        let response: HTTPClient.Response
        do {
            response = try await HTTPClient.send(
                method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)/now")!, headers: [], body: nil,
                timeout: .seconds(20))
        } catch {
            await server.shutdown()
            throw error
        }
        #expect(response.status == 200 && response.body == Array("now".utf8))
        let seen = try #require(recorder.seen.withLock { $0["/now"] })
        #expect(seen.ranInside, "the handler ran inside start")
        #expect(seen.sameThread, "on the service thread that called start")
        await server.shutdown()
    }
}
