import Foundation
import Testing
import WaybillNetwork
import WaybillTesting

/// HTTP over real sockets. Socket I/O runs in `runBlocking` so the cooperative pool stays free
/// for the server's handler tasks.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPServerTests {
    @Test func getCarriesPathQueryHeadersAndRemoteAddress() async throws {
        try await withServer { server in
            let port = server.port
            let response = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(
                    RawConnection.request(
                        "GET",
                        "/api/orders/?status=new&q=a%20b&token=s3cret&plus=x+y&amp=%26%3D",
                        headers: [
                            ("Authorization", "Bearer abc"), ("Idempotency-Key", "k-1"), ("X-Request-ID", "r-9"),
                            ("If-None-Match", "\"e1\""), ("Accept", "application/json"), ("Cookie", "a=b"),
                        ]
                    )
                )
                return try c.readResponse()
            }
            #expect(response.status == 200)
            #expect(response.header("content-type") == "application/json")
            #expect(response.header("cache-control") == "no-store")
            let echo = try Echo(response.body)
            #expect(echo.method == "GET")
            #expect(echo.path == "/api/orders/")
            #expect(echo.query == ["status=new", "q=a b", "token=s3cret", "plus=x y", "amp=&="])
            #expect(echo.headers["authorization"] == "Bearer abc")
            #expect(echo.headers["idempotency-key"] == "k-1")
            #expect(echo.headers["x-request-id"] == "r-9")
            #expect(echo.headers["if-none-match"] == "\"e1\"")
            #expect(echo.headers["accept"] == "application/json")
            #expect(echo.headers["cookie"] == "a=b")
            #expect(echo.remote == "127.0.0.1")
        }
    }

    @Test func postBodyRoundTripThenKeepAlive() async throws {
        try await withServer { server in
            let port = server.port
            let (first, second) = try await runBlocking {
                let c = try RawConnection(port: port)
                let json = Array(#"{"pickup":"A","dropoff":"B"}"#.utf8)
                try c.send(
                    RawConnection.request(
                        "POST",
                        "/api/orders/",
                        headers: [("Content-Type", "application/json")],
                        body: json
                    )
                )
                let first = try c.readResponse()
                try c.send(RawConnection.request("PATCH", "/x", body: Array("hi".utf8)))
                return (first, try c.readResponse())
            }
            let echo = try Echo(first.body)
            #expect(echo.method == "POST")
            #expect(echo.body == #"{"pickup":"A","dropoff":"B"}"#)
            #expect(echo.headers["content-type"] == "application/json")
            #expect(try Echo(second.body).body == "hi")
        }
    }

    /// 5,000 requests on one connection, then no session object is left: nothing leaks across
    /// kept-alive transactions even though lws re-zeroes the session slot each time.
    @Test func keepAliveServesManyRequestsWithoutLeaking() async throws {
        try await withServer { server in
            let baseline = server.liveSessionObjects
            let port = server.port
            let (statuses, samples, liveMidway) = try await runBlocking {
                let c = try RawConnection(port: port)
                var statuses = Set<Int>()
                var samples: [[String]] = []
                var liveMidway: [Int] = []
                for i in 0..<5000 {
                    try c.send(RawConnection.request("GET", "/n?i=\(i)"))
                    let response = try c.readResponse()
                    statuses.insert(response.status)
                    if i % 1000 == 0 {
                        samples.append(try Echo(response.body).query)
                        liveMidway.append(server.liveSessionObjects)
                    }
                }
                return (statuses, samples, liveMidway)
            }
            #expect(statuses == [200])
            #expect(samples == (0..<5).map { ["i=\($0 * 1000)"] })
            #expect(liveMidway.allSatisfy { $0 <= baseline + 1 })  // no growth while the connection lives
            #expect(await eventually { server.liveSessionObjects == baseline })
        }
    }

    /// The peer address is read once per connection and kept with it: each request of a keep-alive
    /// connection sees its own peer, a new connection (whose lws object may reuse a closed one's
    /// memory) sees its own, and what was kept is released when the connection goes.
    @Test func eachConnectionSeesItsOwnPeerAddress() async throws {
        try await withServer { server in
            let port = server.port
            let seen = try await runBlocking { () -> [(expected: String, got: [String])] in
                var seen: [(expected: String, got: [String])] = []
                for round in 0..<24 {
                    let source = "127.0.0.\(2 + round % 5)"
                    let c = try RawConnection(port: port, sourceAddress: source)
                    var got: [String] = []
                    for _ in 0..<3 {
                        try c.send(RawConnection.request("GET", "/who"))
                        got.append(try Echo(c.readResponse().body).remote)
                    }
                    c.close()
                    seen.append((source, got))
                }
                return seen
            }
            for (expected, got) in seen { #expect(got == [expected, expected, expected]) }
            #expect(await eventually { server.liveConnectionAddresses == 0 }, "released with each connection")
        }
    }

    /// A response whose status is no HTTP status goes out as 500, and the server goes on: a
    /// negative or huge one trapped the service thread (every socket of the node went with it).
    @Test func aResponseWithAnImpossibleStatusGoesOutAs500() async throws {
        try await withServer { server in
            let port = server.port
            let answers = try await runBlocking { () -> [String] in
                let c = try RawConnection(port: port)
                var answers: [String] = []
                for code in ["-1", "70000", "4294967296", "0", "99", "150", "600", "201"] {
                    try c.send(RawConnection.request("GET", "/status/any?code=\(code)"))
                    let answer = try c.readResponse()
                    answers.append("\(answer.status) \(answer.header("content-length") ?? "-") \(String(decoding: answer.body, as: UTF8.self))")
                }
                return answers
            }
            // With its body and length: a 1xx turned 500 went out bare, and a keep-alive client
            // that reads to the end waited for the connection to close.
            #expect(answers == Array(repeating: "500 3 odd", count: 7) + ["201 3 odd"])
        }
    }

    @Test func connectionCloseFromTheClientIsHonoured() async throws {
        try await withServer { server in
            let port = server.port
            let (response, closed) = try await answerAndClose(RawConnection.request("GET", "/bye", headers: [("Connection", "close")]), port: port)
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(closed)
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withServer { server in
            let port = server.port
            let responses = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(
                    RawConnection.request("GET", "/one") + RawConnection.request("GET", "/two?x=2")
                        + RawConnection.request("GET", "/three")
                )
                return try c.readResponses(3)
            }
            #expect(try responses.map { try Echo($0.body).path } == ["/one", "/two", "/three"])
            #expect(try Echo(responses[1].body).query == ["x=2"])
        }
    }

    /// lws 4.1 mis-frames a body request that was pipelined behind another one in the same packet
    /// (it hands over the request's own head as its body). The server refuses it with 400 and a
    /// close instead of passing garbage on; it stays healthy.
    @Test func bodyRequestPipelinedInOnePacketIsRefusedNotCorrupted() async throws {
        try await withServer { server in
            let port = server.port
            let (first, second, healthy) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(
                    RawConnection.request("GET", "/one") + RawConnection.request("POST", "/two", body: Array("2".utf8))
                        + RawConnection.request("GET", "/three")
                )
                let first = try c.readResponse()
                let second = try? c.readResponse()
                let d = try RawConnection(port: port)
                try d.send(RawConnection.request("GET", "/healthy"))
                return (first, second, try d.readResponse().status)
            }
            #expect(try Echo(first.body).path == "/one")
            if let second {  // never the POST with a wrong body
                let body = (try? Echo(second.body))?.body
                #expect(second.status == 400 || body == "2", "\(second.status) \(second.text)")
            }
            #expect(healthy == 200)
        }
    }

    @Test func requestPipelinedBehindAFirstBodyIsServed() async throws {
        try await withServer { server in
            let port = server.port
            let responses = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(
                    RawConnection.request("POST", "/two", body: Array("2".utf8)) + RawConnection.request("GET", "/x")
                )
                return try c.readResponses(2)
            }
            #expect(try responses.map { try Echo($0.body).path } == ["/two", "/x"])
            #expect(try Echo(responses[0].body).body == "2")
        }
    }

    /// The body arrives in a later packet than its headers, together with the next request.
    @Test func requestPipelinedBehindALaterBodyIsServed() async throws {
        try await withServer { server in
            let port = server.port
            let responses = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("POST /two HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\n")
                Thread.sleep(forTimeInterval: 0.05)  // only to split the packets, not to wait for state
                try c.send(Array("abc".utf8) + RawConnection.request("GET", "/three"))
                return try c.readResponses(2)
            }
            #expect(try responses.map { try Echo($0.body).path } == ["/two", "/three"])
            #expect(try Echo(responses[0].body).body == "abc")
        }
    }

    @Test(arguments: ["POST", "PUT", "PATCH", "DELETE"])
    func zeroLengthBodyIsAnsweredOnce(method: String) async throws {
        try await withServer { server in
            let port = server.port
            let (first, second) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request(method, "/empty", body: []) + RawConnection.request("GET", "/after"))
                return (try c.readResponse(), try c.readResponse())
            }
            #expect(first.status == 200)
            #expect(try Echo(first.body).method == method)
            #expect(try Echo(first.body).bodyCount == 0)
            #expect(try Echo(second.body).path == "/after")  // not a second answer to the first request
        }
    }

    /// `curl -X POST url` sends neither Content-Length nor chunked: an empty body (RFC 7230).
    @Test func postWithoutLengthHasAnEmptyBody() async throws {
        try await withServer { server in
            let port = server.port
            let (response, closed) = try await answerAndClose("POST /api/orders/42/cancel HTTP/1.1\r\nHost: x\r\n\r\n", port: port)
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(try Echo(response.body).bodyCount == 0)
            #expect(closed)
        }
    }

    @Test func chunkedBodyIsDecoded() async throws {
        try await withServer { server in
            let port = server.port
            let response = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("POST /chunked HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
                try c.send("7;ext=1\r\n, world\r\n")
                try c.send("0\r\nX-Trailer: t\r\n\r\n")
                return try c.readResponse()
            }
            #expect(response.status == 200)
            #expect(response.header("connection") == "close")
            #expect(try Echo(response.body).body == "hello, world")
        }
    }

    /// curl sends `Expect: 100-continue` for bodies over 1 KiB and waits for the interim answer.
    @Test func expectContinueGetsAnInterimResponse() async throws {
        try await withServer { server in
            let port = server.port
            let (interim, final) = try await runBlocking {
                let c = try RawConnection(port: port, timeout: .seconds(20))  // a server that never sends 100 still fails
                let body = String(repeating: "b", count: 2000)
                try c.send("PUT /doc HTTP/1.1\r\nHost: x\r\nContent-Length: 2000\r\nExpect: 100-continue\r\n\r\n")
                let interim = try c.readResponse()
                try c.send(body)
                return (interim, try c.readResponse())
            }
            #expect(interim.status == 100)
            #expect(final.status == 200)
            #expect(try Echo(final.body).bodyCount == 2000)
        }
    }

    @Test func declaredOversizeBodyGets413AtOnce() async throws {
        try await withServer({ $0.maxBodyBytes = 1000 }) { server in
            let port = server.port
            // Declares 50 MB but sends only the head: the answer must not wait for the body.
            let (response, closed) = try await answerAndClose("POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n", port: port)
            #expect(response.status == 413)
            #expect(response.header("connection") == "close")
            #expect(response.text.contains("payload_too_large"))
            #expect(response.header("x-content-type-options") == "nosniff")
            #expect(closed)
        }
    }

    /// Lengths lws and this server could read differently are refused with 400 and a close, at
    /// once: a sign, a Unicode blank (lws read NBSP+5 as 0 and framed no body, while the old trim
    /// read 5), and a value longer than lws's 31-byte buffer (lws then saw no length and framed
    /// no body; the connection hung unanswered until lws's timeout).
    @Test(arguments: [
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: \u{A0}5\r\n\r\nhello",
        "DELETE /x HTTP/1.1\r\nHost: x\r\nContent-Length: \t" + String(repeating: "\t", count: 30) + "5\r\n\r\nhello",
        "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5" + String(repeating: " ", count: 30) + "\r\n\r\nhello",
    ])
    func lengthsReadDifferentlyAreRefusedAtOnce(raw: String) async throws {
        try await withServer { server in
            let port = server.port
            let (response, closed, elapsed) = try await runBlocking {
                let c = try RawConnection(port: port)
                let started = ContinuousClock.now
                try c.send(raw)
                let response = try c.readResponse()
                return (response, c.waitForClose(timeout: .seconds(3)), ContinuousClock.now - started)
            }
            #expect(response.status == 400)
            #expect(response.text.contains("Invalid Content-Length"))
            #expect(closed)
            #expect(elapsed < .seconds(3), "answered at once, not after lws's timeout")
        }
    }

    /// A Transfer-Encoding other than a lone `chunked` in HTTP/1.1 is refused with 400 and a close:
    /// `gzip` or `identity` beside a Content-Length was framed by the length (the bytes after it read
    /// as the next request), and a list or `xchunked` as chunks, where a proxy reading the RFC would
    /// end the request elsewhere (found by a review, 2026-12-07).
    @Test(arguments: [
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\nhello",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST /x HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    ])
    func transferCodingsOtherThanChunkedAreRefused(raw: String) async throws {
        try await withServer { server in
            let port = server.port
            let (response, closed) = try await answerAndClose(raw, port: port)
            #expect(response.status == 400)
            #expect(response.text.contains("Unsupported Transfer-Encoding"))
            #expect(closed)
        }
    }

    /// A lone `chunked`, in any case and with blanks around it, is still read.
    @Test func aLoneChunkedInAnyCaseIsRead() async throws {
        try await withServer { server in
            let port = server.port
            let response = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n5\r\nhello\r\n0\r\n\r\n")
                return try c.readResponse()
            }
            #expect(response.status == 200)
            #expect(try Echo(response.body).body == "hello")
        }
    }

    /// lws makes a `CONNECT` request a raw socket with no timeout: it is answered 405 and closed at
    /// once (it stayed open and unanswered for good, one file descriptor each).
    @Test(arguments: ["CONNECT / HTTP/1.1\r\nHost: x\r\n\r\n", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n"])
    func connectIsRefusedAndClosedAtOnce(raw: String) async throws {
        try await withServer { server in
            let port = server.port
            let (response, closed) = try await answerAndClose(raw, port: port)
            #expect(response.status == 405)
            #expect(response.text.contains("method_not_allowed"))
            #expect(response.header("x-content-type-options") == "nosniff")
            #expect(closed)
        }
    }

    /// `Upgrade: h2c` (what `curl --http2` and Java's `HttpClient` send on plain HTTP), or a WebSocket
    /// upgrade on a path that has none, is served as the HTTP/1.1 request it also is, and the
    /// connection stays usable (both were hung up on with no answer).
    @Test(arguments: [
        "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n",
        "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
    ])
    func anUpgradeThatIsNotOfferedIsServedAsHTTP(upgrade: String) async throws {
        try await withServer { server in
            let port = server.port
            let (first, second) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("GET /api/me?x=1 HTTP/1.1\r\nHost: x\r\n" + upgrade + "\r\n")
                let first = try c.readResponse()
                try c.send("GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
                return (first, try c.readResponse())
            }
            #expect(first.status == 200)
            #expect(first.text.contains(#""path":"\/api\/me""#) || first.text.contains(#""path":"/api/me""#))
            #expect(second.status == 200)
        }
    }

    @Test func chunkedOversizeBodyGets413() async throws {
        try await withServer({ $0.maxBodyBytes = 1000 }) { server in
            let port = server.port
            let response = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                try c.send("300\r\n" + String(repeating: "a", count: 0x300) + "\r\n")
                try c.send("300\r\n" + String(repeating: "a", count: 0x300) + "\r\n")
                return try c.readResponse()
            }
            #expect(response.status == 413)
            #expect(response.text.contains("payload_too_large"))
        }
    }

    /// A route's own body limit (`HTTPResponder.bodyLimit`), with or without a length: 413 before
    /// the body is read; up to 16 KiB is always allowed, and other routes keep `maxBodyBytes`.
    @Test func aRoutesOwnBodyLimitGets413WithOrWithoutALength() async throws {
        try await withServer { server in
            let port = server.port
            let big = String(repeating: "a", count: 20 << 10), allowed = String(repeating: "a", count: 16 << 10)
            let (withLength, chunked, other, small) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("POST", "/small", body: Array(big.utf8)))
                let withLength = try c.readResponse()
                let d = try RawConnection(port: port)
                try d.send("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                try d.send("5000\r\n" + big + "\r\n0\r\n\r\n")
                let chunked = try d.readResponse()
                let e = try RawConnection(port: port)
                try e.send(RawConnection.request("POST", "/other", body: Array(big.utf8)))
                let other = try e.readResponse()
                try e.send(RawConnection.request("POST", "/small", body: Array(allowed.utf8)))
                return (withLength, chunked, other, try e.readResponse())
            }
            #expect(withLength.status == 413 && withLength.text.contains("payload_too_large"))
            #expect(withLength.text.contains("16384"))
            #expect(chunked.status == 413)
            #expect(other.status == 200)
            #expect(small.status == 200)
        }
    }

    /// The server's own limit still applies when it is below the 16 KiB a route always allows (a
    /// chunked body asks the route; its limit was raised to 16 KiB).
    @Test func aRoutesLimitNeverGoesAboveTheServers() async throws {
        try await withServer({ $0.maxBodyBytes = 8192 }) { server in
            let port = server.port
            let body = String(repeating: "a", count: 12 << 10)
            let answer = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("POST /small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
                try c.send("3000\r\n" + body + "\r\n0\r\n\r\n")
                return try c.readResponse()
            }
            #expect(answer.status == 413)
        }
    }

    @Test func oversizeHeaderBlockIsRefusedAndServerStaysHealthy() async throws {
        try await withServer({ $0.maxHeaderBytes = 2048 }) { server in
            let port = server.port
            let (refusal, next) = try await runBlocking {
                let c = try RawConnection(port: port)
                try? c.send(
                    RawConnection.request("GET", "/", headers: [("Cookie", String(repeating: "c", count: 8000))])
                )
                let refusal = String(decoding: try c.readUntilClose(timeout: .seconds(5)), as: UTF8.self)
                let d = try RawConnection(port: port)
                try d.send(RawConnection.request("GET", "/healthy"))
                return (refusal, try d.readResponse())
            }
            #expect(refusal.isEmpty || refusal.hasPrefix("HTTP/1.1 4"))
            #expect(next.status == 200)
        }
    }

    @Test func largeResponseBodyArrivesWhole() async throws {
        try await withServer { server in
            let port = server.port
            let response = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/big?size=1000000"))
                return try c.readResponse()
            }
            #expect(response.body.count == 1_000_000)
            #expect(response.body == (0..<1_000_000).map { UInt8($0 % 251) })
        }
    }

    @Test func noContentAndNotModifiedHaveNoBody() async throws {
        try await withServer { server in
            let port = server.port
            let (notModified, noContent, after) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/status/304") + RawConnection.request("GET", "/status/204"))
                let notModified = try c.readResponse()
                let noContent = try c.readResponse()
                try c.send(RawConnection.request("GET", "/after"))  // the stream is still in sync
                return (notModified, noContent, try c.readResponse())
            }
            #expect(notModified.status == 304)
            #expect(notModified.header("etag") == "\"v1\"")
            #expect(notModified.header("content-length") == nil)
            #expect(noContent.status == 204)
            #expect(try Echo(after.body).path == "/after")
        }
    }

    @Test(arguments: [
        "GARBAGE\r\n\r\n",
        "GET\r\n\r\n",
        "GET / HTTP/9.9\r\n\r\n",
        "GET / HTTP/1.1\r\nNo-Colon-Header\r\n\r\n",
        "\u{0}\u{1}\u{2}\u{FF}binary noise\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nhello",
    ])
    func malformedRequestsDoNotHurtTheServer(raw: String) async throws {
        try await withServer { server in
            let port = server.port
            let healthy = try await runBlocking {
                let c = try RawConnection(port: port)
                try? c.send(raw)
                _ = try? c.readUntilClose(timeout: .seconds(3))  // an error answer or a close
                let d = try RawConnection(port: port)
                try d.send(RawConnection.request("GET", "/healthy"))
                return try d.readResponse().status
            }
            #expect(healthy == 200)
        }
    }

    @Test func headGetsHeadersWithoutBody() async throws {
        try await withServer { server in
            let port = server.port
            let (head, after) = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("HEAD", "/big?size=100"))
                let head = try c.readResponse(forHEAD: true)
                try c.send(RawConnection.request("GET", "/after"))
                return (head, try c.readResponse())
            }
            #expect(head.status == 200)
            #expect(head.header("content-length") == "100")
            #expect(try Echo(after.body).path == "/after")
        }
    }


    /// A request whose handler takes longer than the sockets' drain (a store call may take its
    /// whole 5 s budget) still gets its answer: the loop ended at the 3 s drain and dropped the
    /// connection, though the write behind it could still commit.
    @Test func shutdownWaitsPastTheSocketsDrainForARequestInFlight() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.shutdownDrain = .milliseconds(300)
        configuration.requestDrain = .seconds(20)
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let slow = Self.slowGet(port: server.port, "/slow?ms=2000", timeout: .seconds(30))
        #expect(await eventually { server.liveSessionObjects == 1 })
        await server.shutdown()
        let response = try await slow.value
        #expect(response.status == 200)
        #expect(response.text == "slow")
    }

    /// A GET of `path` on a connection of its own, answered whenever the server answers it.
    static func slowGet(port: Int, _ path: String, timeout: Duration = .seconds(20)) -> Task<RawHTTPResponse, any Error> {
        Task {
            try await runBlocking {
                let c = try RawConnection(port: port, timeout: timeout)
                try c.send(RawConnection.request("GET", path))
                return try c.readResponse()
            }
        }
    }

    @Test func shutdownFinishesInFlightRequestRefusesNewOnesAndIsSafeTwice() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let slow = Self.slowGet(port: server.port, "/slow")
        #expect(await eventually { server.liveSessionObjects == 1 })
        await server.shutdown()
        let response = try await slow.value
        #expect(response.status == 200)
        #expect(response.text == "slow")
        await server.shutdown()
        #expect(server.liveSessionObjects == 0)
    }

    /// A keep-alive connection opened before a shutdown and idle when it begins.
    static func idleConnection(port: Int) async throws -> RawConnection {
        try await runBlocking {
            let c = try RawConnection(port: port)
            try c.send(RawConnection.request("GET", "/before"))
            _ = try c.readResponse()
            return c
        }
    }

    /// From shutdown on, a connect is refused by the kernel (a proxy in front tries the next node:
    /// nothing was sent); a request on a connection kept from before is answered, with
    /// `Connection: close`, while idle connections are kept (`idleConnectionDrain`); and once none
    /// is left the server ends without waiting for the rest of that time. Before, new connections
    /// were accepted and closed, and a request on a kept one got 503: behind nginx a deploy cost a
    /// burst of 502 and 503 answers to writes (docs/HARDENING.md).
    @Test func shutdownRefusesConnectsAndAnswersRequestsOnConnectionsKeptFromBefore() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.keepAliveTimeout = .seconds(60)  // `kept` would otherwise be closed for idling
        configuration.idleConnectionDrain = .seconds(30)
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let port = server.port
        let kept = try await Self.idleConnection(port: port)
        let keptForUpgrade = try await Self.idleConnection(port: port)
        let began = ContinuousClock.now
        let stopping = Task { await server.shutdown() }
        let refused = try await runBlocking { () -> Bool in
            let deadline = ContinuousClock.now + .seconds(15)
            while ContinuousClock.now < deadline {
                do {
                    let c = try RawConnection(port: port, timeout: .seconds(8))
                    try c.send(RawConnection.request("GET", "/new"))
                    _ = try c.readResponse()  // answered: shutdown has not begun yet
                } catch RawConnectionError.connectFailed(let code) {
                    if code == ECONNREFUSED { return true }
                    // Not the listener's answer: the process out of descriptors or the machine of
                    // local ports while other tests hold thousands of sockets (a clean-clone CI run
                    // of 149baaf failed here at once). Try again until the deadline.
                    usleep(10_000)
                    continue
                } catch {
                    // A connection whose handshake completed in the instant between the server's
                    // last accept and its closing the listener is reset: try again.
                    continue
                }
            }
            return false
        }
        #expect(refused, "a connect during the drain is refused")
        let (late, closedAfter) = try await runBlocking { () -> (RawHTTPResponse, Bool) in
            try kept.send(RawConnection.request("GET", "/after"))
            let answer = try kept.readResponse()
            do {
                _ = try kept.readResponse()
                return (answer, false)
            } catch RawConnectionError.closed {
                return (answer, true)
            }
        }
        #expect(late.status == 200, "a request on a connection kept from before is answered")
        #expect(late.text.contains(#""path":"\/after""#))
        #expect(late.header("connection") == "close")
        #expect(closedAfter)
        let upgrade = try await runBlocking { () -> RawHTTPResponse in
            try keptForUpgrade.send(RawConnection.request("GET", "/ws/orders/", headers: [
                ("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Version", "13"),
                ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ]))
            return try keptForUpgrade.readResponse()
        }
        #expect(upgrade.status == 503, "a socket's upgrade is refused: its client goes to another node")
        #expect(upgrade.text.contains("shutting_down"))
        await stopping.value
        #expect(ContinuousClock.now - began < .seconds(20), "no idle connection was left to wait for")
    }

    /// Past `idleConnectionDrain`, a kept connection still idle is closed, even while a request
    /// keeps the server draining.
    @Test func idleConnectionsAreClosedWhenTheirDrainEnds() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.keepAliveTimeout = .seconds(60)
        configuration.idleConnectionDrain = .seconds(1)
        configuration.requestDrain = .seconds(30)  // the slow answer's 8 s, with room on a slow runner
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let port = server.port
        let kept = try await Self.idleConnection(port: port)
        // Its session gone first, so the count below is the slow request's (not a shutdown begun
        // before the slow request even connected).
        #expect(await eventually { server.liveSessionObjects == 0 })
        let slow = Self.slowGet(port: port, "/slow?ms=8000")
        #expect(await eventually { server.liveSessionObjects == 1 })
        let stopping = Task { await server.shutdown() }
        // The listener closes first: once a connect is refused, the stop has begun.
        #expect(await eventually(timeout: .seconds(10)) { await connectIsRefused(port: port) })
        let closed = try await runBlocking { () -> Bool in
            kept.timeout = .seconds(6)  // the idle drain's 1 s, and before the slow answer
            do {
                _ = try kept.readResponse()
                return false
            } catch RawConnectionError.closed {
                return true
            }
        }
        #expect(closed, "the idle connection is closed when its drain ends")
        let answer = try await slow.value
        #expect(answer.status == 200)
        #expect(answer.header("connection") == "close", "a request in hand at shutdown closes its connection")
        await stopping.value
    }

    /// An answer whose head went out before the stop began (a keep-alive answer then) closes its
    /// connection once its body is written, instead of leaving it open, idle, until the idle
    /// drain ends (a review, 2026-12-05; this test came a session later). The client reads slowly,
    /// so most of the 8 MiB body is still to be written when the stop begins.
    @Test func anAnswerBeingWrittenWhenTheStopBeginsClosesItsConnectionAfterIt() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.keepAliveTimeout = .seconds(60)
        configuration.idleConnectionDrain = .seconds(30)  // without the close, the connection stays this long
        configuration.requestDrain = .seconds(30)
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let port = server.port, size = 8 << 20
        let c = try RawConnection(port: port, timeout: .seconds(20), receiveBufferSize: 16 << 10)
        defer { c.close() }
        let head = try await runBlocking { () -> String in
            // `/slow` with no wait: a body of one repeated byte, cheap to make (a debug build took
            // about a second of CPU for `/big`'s 8 MiB pattern, which timed tests beside it felt).
            try c.send(RawConnection.request("GET", "/slow?ms=0&size=\(size)"))
            var lines: [String] = []
            while true {
                let line = try c.readLine()
                if line.isEmpty { return lines.joined(separator: "\n").lowercased() }
                lines.append(line)
            }
        }
        #expect(head.hasPrefix("http/1.1 200"))
        #expect(!head.contains("connection: close"), "the head went out before the stop")
        let stopping = Task { await server.shutdown() }
        #expect(await eventually(timeout: .seconds(10)) { await connectIsRefused(port: port) })
        let body = try await runBlocking { try c.readUntilClose(timeout: .seconds(15)) }
        #expect(body.count == size, "the whole body, then the close")
        #expect(body.first == 0x61 && body.last == 0x61)
        await stopping.value
    }

    @Test(arguments: ["localhost", "0.0.0.0"])
    func bindsByNameOrToEveryInterface(host: String) async throws {
        try await withServer({ $0.host = host }) { server in
            let port = server.port
            let status = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/"))
                return try c.readResponse().status
            }
            #expect(status == 200)
        }
    }

    @Test func startFailsWhenThePortIsTaken() async throws {
        try await withServer { server in
            var configuration = HTTPServerConfiguration()
            configuration.port = server.port
            let second = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
            #expect(throws: HTTPServerError.self) { try second.start() }
            await second.shutdown()
        }
    }
}
