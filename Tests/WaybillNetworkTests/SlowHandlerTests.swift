import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

@Suite(.timeLimit(.minutes(1)))
struct SlowHandlerTests {
    /// lws's own request timeout must not cut off a responder that takes longer than it.
    @Test func handlerSlowerThanTheLwsTimeoutStillAnswers() async throws {
        try await withServer({ $0.lwsTimeout = .seconds(1) }) { server in
            let port = server.port
            let (first, second) = try await runBlocking {
                // A generous client timeout: with the 5 s default this failed twice (`.timeout`, not
                // a closed connection) in the full parallel suite on a loaded machine, never alone;
                // the likeliest cause is the handler's `Task.sleep` resuming late while the other
                // tests keep the cooperative pool busy. lws cutting the request off shows as a close.
                let c = try RawConnection(port: port, timeout: .seconds(20))
                try c.send(RawConnection.request("GET", "/slow?ms=2200"))
                let first = try c.readResponse()
                try c.send(RawConnection.request("POST", "/slow?ms=1500", body: Array("x".utf8)))
                return (first, try c.readResponse())
            }
            #expect(first.status == 200)
            #expect(second.status == 200)
        }
    }

    /// The same for a request whose body lws still expects after the read that ended it: a chunked
    /// body (it has no length for lws), or a body method without a length (its body is empty) whose
    /// head came with more bytes (lws counts them against the 100 MB it then expects). lws set its
    /// own per-piece timeout again after that read, which cut the handler off after lws's timeout
    /// instead of the handler deadline (found by reviews, 2026-12-07: a write that took over 10 s
    /// went unanswered).
    @Test(arguments: [
        "POST /slow?ms=2200 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        "POST /slow?ms=2200 HTTP/1.1\r\nHost: x\r\n\r\nstray bytes",
    ])
    func aHandlerSlowerThanTheLwsTimeoutStillAnswersWhenLwsExpectsMoreBody(raw: String) async throws {
        try await withServer({ $0.lwsTimeout = .seconds(1) }) { server in
            let port = server.port
            let answer = try await runBlocking {
                let c = try RawConnection(port: port, timeout: .seconds(20))
                try c.send(raw)
                return try c.readResponse()
            }
            #expect(answer.status == 200)
        }
    }

    /// A body that trickles in (a byte every so often, each within lws's own per-piece timeout) is
    /// cut off at `bodyDeadline` with a 408, however long it claims to be.
    @Test(arguments: [false, true]) func aTricklingBodyGets408AtTheDeadline(chunked: Bool) async throws {
        try await withServer({ $0.bodyDeadline = .seconds(1) }) { server in
            let port = server.port
            let (response, elapsed) = try await runBlocking {
                let c = try RawConnection(port: port, timeout: .seconds(20))
                let start = ContinuousClock.now
                try c.send(
                    chunked
                        ? "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                        : "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
                if chunked { try c.send("100000\r\n") }
                // Stop as soon as the server answers: sending on a closed connection fails.
                for _ in 0..<40 where (try? c.send("x")) != nil {
                    Thread.sleep(forTimeInterval: 0.1)  // the client's pace, not a wait for the server
                }
                return (try c.readResponse(), ContinuousClock.now - start)
            }
            #expect(response.status == 408)
            #expect(elapsed < .seconds(3.5), "answered at the deadline, not when the body ran out")
        }
    }

    /// A client that half-closes right after its request (`shutdown(SHUT_WR)`, as `nc -N` does)
    /// still gets the answer of a handler that takes a while: it used to lose it when lws read the
    /// end of stream before the response was written.
    @Test(arguments: [nil, 64 << 10, 1 << 20]) func aClientThatHalfClosesStillGetsTheAnswerOfASlowHandler(size: Int?) async throws {
        try await withServer { server in
            let port = server.port
            let target = "/slow?ms=300" + (size.map { "&size=\($0)" } ?? "")
            let responses = try await runBlocking {
                try ["GET", "POST"].map { method in
                    let c = try RawConnection(port: port, timeout: .seconds(10))
                    defer { c.close() }
                    try c.send(RawConnection.request(method, target, body: method == "POST" ? Array("x".utf8) : nil))
                    c.shutdownWrite()
                    return try c.readResponse()
                }
            }
            #expect(responses.map(\.status) == [200, 200])
            #expect(responses.map(\.body.count) == [size ?? 4, size ?? 4])
        }
    }

    /// A request pipelined behind a request with a body whose handler takes a while (both in one
    /// `send`) is answered, after it, with small and large answers alike. Usually right after it;
    /// in one CI run of several both answers came only after about 5 s (docs/HARDENING.md: known,
    /// not fixed), so the time is not asserted here, only that nothing is lost.
    @Test(arguments: [nil, 64 << 10]) func aRequestPipelinedBehindASlowBodyRequestIsAnswered(size: Int?) async throws {
        try await withServer { server in
            let port = server.port
            let responses = try await runBlocking {
                let c = try RawConnection(port: port, timeout: .seconds(20))
                defer { c.close() }
                let target = "/slow?ms=300" + (size.map { "&size=\($0)" } ?? "")
                try c.send(RawConnection.request("POST", target, body: Array("x".utf8)) + RawConnection.request("GET", "/x"))
                return try c.readResponses(2)
            }
            #expect(responses.map(\.status) == [200, 200])
            #expect(responses.first?.body.count == size ?? 4)
            #expect(try Echo(responses[1].body).path == "/x")
        }
    }

    /// The same pipelined pair must not hold the service thread while the slow handler runs: another
    /// connection is answered meanwhile (a review found the thread waiting up to 10 s for the
    /// handler when lws repeated the body's completion, which froze every socket of the node). A
    /// guard of the outcome only: no test has made lws repeat the completion (HARDENING.md), so this
    /// passed with the old wait too.
    @Test func aPipelinedPairBehindASlowHandlerDoesNotStallOtherConnections() async throws {
        try await withServer { server in
            let port = server.port
            let timings = try await runBlocking { () -> [Duration] in
                var pairs: [RawConnection] = []
                for _ in 0..<3 {
                    let c = try RawConnection(port: port, timeout: .seconds(30))
                    try c.send(RawConnection.request("POST", "/slow?ms=15000", body: Array("{}".utf8)) + RawConnection.request("GET", "/x"))
                    pairs.append(c)
                }
                Thread.sleep(forTimeInterval: 0.2)
                var timings: [Duration] = []
                for _ in 0..<3 {
                    let other = try RawConnection(port: port, timeout: .seconds(30))
                    let start = ContinuousClock.now
                    try other.send(RawConnection.request("GET", "/healthz"))
                    _ = try other.readResponse()
                    timings.append(ContinuousClock.now - start)
                }
                withExtendedLifetime(pairs) {}
                return timings
            }
            // Well before the handlers end (15 s), with room for a runner busy with the parallel
            // suite: with 5 s handlers and 3 s of room, one answer in several local runs of the
            // whole group took 3.55 s (2026-12-06: [3.55, 0.22, 1.01] s; alone, each took
            // milliseconds), and a run can starve the cooperative pool for seconds more.
            #expect(timings.allSatisfy { $0 < .seconds(10) }, "\(timings)")
        }
    }
}
