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
    /// past several timeouts of 1 s. (Counted from its first answer, it would be closed between two
    /// requests at about 1 s.) Once the client stops, the wheel closes it.
    @Test func aConnectionInUseStaysOpenAndIsClosedOnceIdle() async throws {
        try await withServer(Self.configure) { server in
            let port = server.port
            let (statuses, closed, idleFor) = try await runBlocking { () -> ([Int], Bool, Duration) in
                let c = try RawConnection(port: port)
                var statuses: [Int] = []
                for _ in 0..<8 {
                    try c.send(RawConnection.request("GET", "/status/204"))
                    statuses.append(try c.readResponse().status)
                    Thread.sleep(forTimeInterval: 0.4)
                }
                let start = ContinuousClock.now
                return (statuses, c.waitForClose(timeout: .seconds(8)), ContinuousClock.now - start)
            }
            #expect(statuses == Array(repeating: 204, count: 8))  // one connection throughout, ~3.2 s
            #expect(closed)
            #expect(idleFor < .seconds(5))
            #expect(await server.writeStatistics().keepAliveCloses == 1)
        }
    }

    /// A handler running longer than the timeout (on a connection that was idle before the request)
    /// is answered, and the connection serves the next request.
    @Test func aRequestLongerThanTheTimeoutIsAnsweredAndTheConnectionKept() async throws {
        try await withServer(Self.configure) { server in
            let port = server.port
            let (first, slow, next) = try await runBlocking { () -> (Int, RawHTTPResponse, Int) in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/status/204"))
                let first = try c.readResponse().status
                Thread.sleep(forTimeInterval: 0.5)
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
            #expect(await server.writeStatistics().keepAliveCloses == 1)
        }
    }
}
