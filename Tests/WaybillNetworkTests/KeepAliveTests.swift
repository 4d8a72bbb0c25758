import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

/// Kept-alive connections are closed by the server's `KeepAliveWheel`, not by lws's timer (whose
/// sorted list made every request walk past every idle connection): idle ones at the timeout, and
/// never one whose request is running or whose answer is still on its way to a slow reader.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct KeepAliveTests {
    private static func configure(_ c: inout HTTPServerConfiguration) { c.keepAliveTimeout = .seconds(1) }

    /// Each answer starts the idle period over: a client asking every 0.4 s keeps its connection
    /// past two timeouts of 2 s. (Counted from its first answer, it would be closed between two
    /// requests at about 2 s.) Once the client stops, the wheel closes it. 2 s, not 1: a client
    /// thread stalled for 1.6 s on a busy runner still passes.
    @Test func aConnectionInUseStaysOpenAndIsClosedOnceIdle() async throws {
        try await withServer({ $0.keepAliveTimeout = .seconds(2) }) { server in
            let port = server.port
            let (statuses, closed, idleFor) = try await runBlocking { () -> ([Int], Bool, Duration) in
                let c = try RawConnection(port: port)
                var statuses: [Int] = []
                for index in 0..<12 {
                    if index > 0 { Thread.sleep(forTimeInterval: 0.4) }
                    try c.send(RawConnection.request("GET", "/status/204"))
                    statuses.append(try c.readResponse().status)
                }
                let start = ContinuousClock.now  // the server went idle just before
                return (statuses, c.waitForClose(timeout: .seconds(8)), ContinuousClock.now - start)
            }
            #expect(statuses == Array(repeating: 204, count: 12))  // one connection throughout, ~4.8 s
            #expect(closed)
            // Not before the timeout (2 s from the last answer), nor long after it.
            #expect(idleFor >= .milliseconds(1800) && idleFor < .seconds(6))
            #expect(await server.writeStatistics().keepAliveCloses == 1)
        }
    }

    /// A handler running longer than the timeout (on a connection that was idle before the request)
    /// is answered, and the connection serves the next request. (The connection's turn in the
    /// wheel comes while the handler runs: the request began, so it closes nothing.)
    @Test func aRequestLongerThanTheTimeoutIsAnsweredAndTheConnectionKept() async throws {
        try await withServer(Self.configure) { server in
            let port = server.port
            let (first, slow, next) = try await runBlocking { () -> (Int, RawHTTPResponse, Int) in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/status/204"))
                let first = try c.readResponse().status
                Thread.sleep(forTimeInterval: 0.2)
                try c.send(RawConnection.request("GET", "/slow?ms=2500"))
                let slow = try c.readResponse()
                try c.send(RawConnection.request("GET", "/status/204"))
                return (first, slow, try c.readResponse().status)
            }
            #expect(first == 204 && next == 204)
            #expect(slow.status == 200 && slow.text == "slow")
            #expect(await server.writeStatistics().keepAliveCloses == 0)
        }
    }

    /// An answer lws is still sending when the transaction ends (larger than what the kernel
    /// takes at once, to a client reading slowly) keeps its connection for as long as it takes; the
    /// connection goes idle, and is closed by the wheel, only once lws has sent it all.
    @Test func aLargeAnswerToASlowReaderIsSentWholeAndTheConnectionClosedOnceIdle() async throws {
        try await withServer(Self.configure) { server in
            let port = server.port
            let size = 900_000  // answered at once (`HTTPSession.immediateWriteLimit`), lws keeps the rest
            let (response, closed) = try await runBlocking { () -> (RawHTTPResponse, Bool) in
                let c = try RawConnection(port: port, receiveBufferSize: 4096)
                c.timeout = .seconds(20)
                try c.send(RawConnection.request("GET", "/big?size=\(size)"))
                Thread.sleep(forTimeInterval: 2.5)  // past two timeouts, reading nothing
                let response = try c.readResponse()
                return (response, c.waitForClose(timeout: .seconds(8)))
            }
            #expect(response.status == 200)
            #expect(response.body == (0..<size).map { UInt8($0 % 251) })
            #expect(closed)
            let statistics = await server.writeStatistics()
            #expect(statistics.keepAliveAfterSending == 1)  // the path this test is for was taken
            #expect(statistics.keepAliveCloses == 1)
        }
    }

    /// A request whose head arrives in pieces across the connection's turn (a slow link) is not
    /// cut off: lws holds the start of its head, so the connection is not idle. Before (found by a
    /// review) the wheel closed it, where lws's own keep-alive timer gave way to the head's arrival.
    @Test func aRequestHeadArrivingAcrossTheTurnIsAnswered() async throws {
        try await withServer(Self.configure) { server in
            let port = server.port
            let (first, second) = try await runBlocking { () -> (Int, Int) in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/status/204"))
                let first = try c.readResponse().status
                // At once: a client stalled for a second here would meet its turn with nothing sent.
                try c.send("GET /status/204 HTTP/1.1\r\nHo")
                Thread.sleep(forTimeInterval: 2)  // the turn comes at 1–1.1 s of idling
                try c.send("st: 127.0.0.1\r\n\r\n")
                return (first, try c.readResponse().status)
            }
            #expect(first == 204 && second == 204)
            #expect(await server.writeStatistics().keepAliveCloses == 0)
        }
    }

    /// A head that stops arriving is still bounded: at the connection's turn it gets lws's
    /// per-step timeout (shortened here to 2 s), as a head lws waits for does.
    @Test func aRequestHeadThatStopsArrivingIsClosed() async throws {
        try await withServer({
            $0.keepAliveTimeout = .seconds(1)
            $0.lwsTimeout = .seconds(2)
        }) { server in
            let port = server.port
            let (first, closed, after) = try await runBlocking { () -> (Int, Bool, Duration) in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/status/204"))
                let first = try c.readResponse().status
                // Right after the answer: lws would wait its header timeout (10 s by default) for
                // the rest; the turn re-arms it with the shortened one.
                try c.send("GET /status/204 HTTP/1.1\r\nHo")
                let start = ContinuousClock.now
                return (first, c.waitForClose(timeout: .seconds(9)), ContinuousClock.now - start)
            }
            #expect(first == 204)
            #expect(closed)
            // 1 s to the turn, then 2 s: not at the turn (the head check), nor at lws's own 10 s.
            #expect(after >= .milliseconds(2500) && after < .seconds(8))
            #expect(await server.writeStatistics().keepAliveCloses == 0)
        }
    }
}
