import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

/// Starts every request's task at once (`start(true)`) on `executor`, and records, right after
/// `start` returns, whether the handler had already run, and on which thread. `/suspends` waits
/// for another thread once before it answers.
private final class ImmediateRecorder: HTTPResponder {
    /// (ran inside `start`, on the thread that called `start`), by path.
    let seen = Mutex<[String: (ranInside: Bool, sameThread: Bool)]>([:])
    private let ran = Mutex<[String: UInt]>([:])
    let executor = CountingExecutor()

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        ran.withLock { $0[request.path] = UInt(pthread_self()) }
        if request.path == "/suspends" {
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(10)) { done.resume() }
            }
        }
        return HTTPResponse(status: 200, body: Array("now".utf8))
    }

    func executor(for request: HTTPRequest) -> (any TaskExecutor)? { executor }

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
    private static func withServer(_ body: (HTTPServer, ImmediateRecorder) async throws -> Void) async throws {
        let recorder = ImmediateRecorder()
        try await WaybillNetworkTests.withServer(responder: recorder) { server in try await body(server, recorder) }
    }

    private static func get(_ server: HTTPServer, _ path: String) async throws -> HTTPClient.Response {
        try await HTTPClient.send(
            method: "GET", url: URL(string: "http://127.0.0.1:\(server.port)\(path)")!, headers: [], body: nil,
            timeout: .seconds(20))
    }

    /// It stays on the calling thread across `await`s that do not suspend, though it prefers
    /// another executor: that executor is given no job.
    @Test func aTaskStartedAtOnceRunsBeforeStartReturnsOnTheCallingThread() async throws {
        try await Self.withServer { server, recorder in
            let response = try await Self.get(server, "/now")
            #expect(response.status == 200 && response.body == Array("now".utf8))
            let seen = try #require(recorder.seen.withLock { $0["/now"] })
            #expect(seen.ranInside, "the handler ran inside start")
            #expect(seen.sameThread, "on the service thread that called start")
            #expect(recorder.executor.jobs.load(ordering: .relaxed) == 0, "no job for the preferred executor")
        }
    }

    /// A handler that suspends goes on on its preferred executor, and its answer still arrives.
    @Test func aTaskStartedAtOnceThatSuspendsGoesOnOnItsExecutor() async throws {
        try await Self.withServer { server, recorder in
            let response = try await Self.get(server, "/suspends")
            #expect(response.status == 200 && response.body == Array("now".utf8))
            let seen = try #require(recorder.seen.withLock { $0["/suspends"] })
            #expect(seen.sameThread, "started on the service thread")
            #expect(recorder.executor.jobs.load(ordering: .relaxed) >= 1, "resumed on its executor")
        }
    }
}
