import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

/// Answers every request inside `start` (`start(true)`), on the service thread, as an order write
/// running inline does.
private final class InlineResponder: HTTPResponder {
    func respond(to request: HTTPRequest) async -> HTTPResponse {
        HTTPResponse(status: 200, body: Array("answer to \(request.path)".utf8))
    }

    func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void) { start(true) }
}

/// lws ends a kept-alive transaction by asking for `POLLOUT` and reads the next request only after
/// the loop saw it (`LRS_DEFERRING_ACTION`). The server reports the socket writable to libev as soon
/// as an answer went into the kernel whole (`ServerCore.answer`), so lws takes that step in the same
/// pass, without a pass of its own and the two `epoll_ctl`s around it.
@Suite(.timeLimit(.minutes(1)))
struct KeptAliveRoundTests {
    private static func configure(_ c: inout HTTPServerConfiguration) { c.eventLoop = .libev }

    /// Requests one after another on one connection: the loop makes at most about two passes per
    /// request (the one that reads it, lws's idle pass after it). With the `POLLOUT` round it made
    /// three (measured: 3.0 per request; 2.0 with the report).
    @Test func aKeptAliveAnswerTakesNoLoopPassOfItsOwn() async throws {
        try await withServer(Self.configure, responder: InlineResponder()) { server in
            let port = server.port
            let requests = 60
            let connection = try RawConnection(port: port)
            // One request first, so the connection and its head buffer exist before counting.
            let warm = try await runBlocking {
                try connection.send(RawConnection.request("GET", "/warm"))
                return try connection.readResponse().status
            }
            #expect(warm == 200)
            let before = await server.writeStatistics()
            let bodies = try await runBlocking { () -> [String] in
                var bodies: [String] = []
                for index in 0..<requests {
                    // A pause, so the loop is back in its wait before each request: one sent at
                    // once after an answer can share a pass with that answer's steps either way.
                    Thread.sleep(forTimeInterval: 0.002)
                    try connection.send(RawConnection.request("GET", "/r\(index)"))
                    bodies.append(String(decoding: try connection.readResponse().body, as: UTF8.self))
                }
                return bodies
            }
            let after = await server.writeStatistics()
            #expect(bodies == (0..<requests).map { "answer to /r\($0)" })
            #expect(after.httpResponses - before.httpResponses == requests)
            // Less the passes the service thread's timers may have made (about 30 a second, however
            // slow the runner), and with a margin for the statistics' own wake-ups: 2.5 per
            // request still fails with the round (3.0).
            let passes = (after.loopPasses - before.loopPasses) - (after.timerTicks - before.timerTicks)
            #expect(after.loopPasses > before.loopPasses)
            #expect(passes * 2 <= requests * 5, "\(passes) loop passes for \(requests) requests")
        }
    }

    /// Requests sent together (pipelined) are still all answered, in order: lws's idle pass, which
    /// serves the bytes it holds behind an answered request, still follows each answer.
    @Test func pipelinedRequestsToAnInlineResponderAreAllAnswered() async throws {
        try await withServer(Self.configure, responder: InlineResponder()) { server in
            let port = server.port
            let bodies = try await runBlocking { () -> [String] in
                let connection = try RawConnection(port: port)
                let requests = (0..<4).map { RawConnection.request("GET", "/p\($0)") }
                try connection.send(Array(requests.joined()))
                return try connection.readResponses(4).map { String(decoding: $0.body, as: UTF8.self) }
            }
            #expect(bodies == (0..<4).map { "answer to /p\($0)" })
        }
    }
}
