import Dispatch
import Foundation
import Synchronization
import Testing
import WaybillNetwork
import WaybillTesting

#if canImport(Glibc)
import Glibc
#endif

/// The blocking HTTP client behind `waybill driver` and the client library's `SocketHTTPTransport`:
/// its timeout is a deadline for the whole request, connect included.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPClientTests {
    /// A listening socket on a free loopback port that never accepts. `backlog` 0 with one
    /// connection waiting in its queue makes the kernel drop the next SYN, as a firewall would.
    final class Listener {
        let fd: Int32
        let port: Int
        private var fillers: [Int32] = []

        init(backlog: Int32) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.fd = fd
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(fd, pointer, length) == 0 && listen(fd, backlog) == 0 && getsockname(fd, pointer, &length) == 0
                }
            }
            try #require(bound)
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        /// Fills the accept queue with connections nobody accepts.
        func fill(_ count: Int) {
            for _ in 0..<count {
                let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = inet_addr("127.0.0.1")
                address.sin_port = in_port_t(UInt16(port).bigEndian)
                _ = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
                }
                fillers.append(client)
            }
            usleep(100_000)  // the handshakes complete into the queue
        }

        deinit {
            for filler in fillers { close(filler) }
            close(fd)
        }
    }

    /// A server whose address drops SYNs: the request fails at its deadline. The connect had none
    /// (the timeouts were set after it): the kernel's SYN retries held the thread for about two
    /// minutes, past the session's stop.
    @Test func aConnectThatGetsNoAnswerEndsAtTheDeadline() async throws {
        let listener = try Listener(backlog: 0)
        listener.fill(2)
        let url = try #require(URL(string: "http://127.0.0.1:\(listener.port)/api/me"))
        let outcome = await Self.outcome(within: .seconds(5)) {
            _ = try await HTTPClient.send(method: "GET", url: url, timeout: .seconds(1))
        }
        // The socket's own deadline, not the request's outer bound (`OwnThread`), which would end
        // the wait even with the connect's timeout gone.
        #expect(outcome.hasPrefix("failed: cannot connect"), "got \(outcome)")
        withExtendedLifetime(listener) {}
    }

    /// A server that takes the connection and never answers: a timeout under a second was a
    /// `timeval` of 0 seconds, which means no timeout, and the read waited for ever.
    @Test func aTimeoutUnderASecondStillEndsTheRead() async throws {
        let listener = try Listener(backlog: 16)  // the kernel completes the handshake; nobody reads
        let url = try #require(URL(string: "http://127.0.0.1:\(listener.port)/api/me"))
        let outcome = await Self.outcome(within: .seconds(5)) {
            _ = try await HTTPClient.send(method: "GET", url: url, timeout: .milliseconds(300))
        }
        #expect(outcome == "failed: timed out", "got \(outcome)")
        withExtendedLifetime(listener) {}
    }

    /// How `body` ended within `limit`: "failed: <why>" (threw), "answered", or "still waiting" (then its
    /// thread is left blocked, and the test fails instead of hanging with it).
    static func outcome(within limit: Duration, _ body: @escaping @Sendable () async throws -> Void) async -> String {
        await withCheckedContinuation { (continuation: CheckedContinuation<String, Never>) in
            let once = Mutex<CheckedContinuation<String, Never>?>(continuation)
            let finish: @Sendable (String) -> Void = { text in once.withLock { $0.take() }?.resume(returning: text) }
            Task.detached {
                do {
                    try await body()
                    finish("answered")
                } catch {
                    finish((error as? HTTPClient.Failure).map { "failed: \($0.description)" } ?? "other error: \(error)")
                }
            }
            Task.detached {
                try? await Task.sleep(for: limit)
                finish("still waiting")
            }
        }
    }

    /// A loopback server that takes one connection, reads its request head, writes `answer` and
    /// closes: with `reset`, by a TCP reset (`SO_LINGER` 0), as a server or proxy dying mid-answer.
    /// Unchecked: its listener is only kept open here; the thread uses its descriptor alone.
    final class OneAnswerServer: @unchecked Sendable {
        let port: Int
        private let listener: Listener
        private let head = Mutex("")
        private let done = DispatchSemaphore(value: 0)
        /// The request head the server read (once `finished()`).
        var requestHead: String { head.withLock { $0 } }

        init(answer: [UInt8], reset: Bool = false) throws {
            listener = try Listener(backlog: 4)
            port = listener.port
            let listening = listener.fd
            Thread { [self] in
                defer { done.signal() }
                let fd = accept(listening, nil, nil)
                guard fd >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 65_536), read = 0
                while read < buffer.count {
                    let n = buffer[read...].withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    guard n > 0 else { break }
                    read += n
                    if buffer[..<read].firstRange(of: [13, 10, 13, 10]) != nil { break }
                }
                head.withLock { $0 = String(decoding: buffer[..<read], as: UTF8.self) }
                _ = answer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if reset {
                    usleep(50_000)  // the answer's bytes reach the client before the reset
                    var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                    setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                }
                close(fd)
            }.start()
        }

        /// Waits until the server has answered and closed (at most 10 s).
        func finished() { _ = done.wait(timeout: .now() + 10) }
    }

    /// `GET /` sent to a server that answers with `raw` and closes (with a reset when `reset`).
    static func get(answeredWith raw: [UInt8], reset: Bool = false) async throws -> HTTPClient.Response {
        let server = try OneAnswerServer(answer: raw, reset: reset)
        defer { server.finished() }
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/"))
        return try await HTTPClient.send(method: "GET", url: url, timeout: .seconds(5))
    }

    /// An answer cut off before its Content-Length, by a close or by a reset, is a failure, not a
    /// shorter body: it was returned as a complete 200 (found by a review, 2026-12-07).
    @Test(arguments: [false, true]) func anAnswerCutShortOfItsLengthIsAFailure(reset: Bool) async throws {
        let error = await #expect(throws: HTTPClient.Failure.self) {
            _ = try await Self.get(
                answeredWith: Array("HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n".utf8) + Array(repeating: 97, count: 1200),
                reset: reset)
        }
        #expect(error?.description.contains(reset ? "broke" : "cut short") == true, "\(String(describing: error))")
    }

    /// An interim answer before the real one (a proxy's `100 Continue` or `103 Early Hints`) is
    /// skipped: it was taken as the answer, with the real one as its body.
    @Test func anInterimAnswerIsSkipped() async throws {
        let answer = try await Self.get(
            answeredWith: Array("HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok".utf8))
        #expect(answer.status == 200)
        #expect(answer.body == Array("ok".utf8))
    }

    /// A reset after a whole answer (a proxy that answers 413 before reading the body, and closes
    /// with the body unread) leaves the answer: only an answer the reset cut short is a failure.
    @Test func aResetAfterAWholeAnswerKeepsTheAnswer() async throws {
        let answer = try await Self.get(
            answeredWith: Array("HTTP/1.1 413 Content Too Large\r\nContent-Length: 2\r\n\r\nno".utf8), reset: true)
        #expect(answer.status == 413)
        #expect(answer.body == Array("no".utf8))
    }

    /// The request line carries the URL's path as written, percent escapes and a trailing slash
    /// kept (`url.path` decoded them and dropped the slash), and a POST without a body says
    /// `Content-Length: 0`, which some proxies require (411).
    @Test func theRequestLineKeepsThePathAsWrittenAndAnEmptyPostSaysItsLength() async throws {
        let server = try OneAnswerServer(answer: Array("HTTP/1.1 204 No Content\r\n\r\n".utf8))
        let url = try #require(URL(string: "http://127.0.0.1:\(server.port)/a%20b/c%2Fd/?limit=5"))
        let answer = try await HTTPClient.send(method: "POST", url: url, timeout: .seconds(5))
        #expect(answer.status == 204)
        server.finished()
        let lines = server.requestHead.components(separatedBy: "\r\n")
        #expect(lines.first == "POST /a%20b/c%2Fd/?limit=5 HTTP/1.1")
        #expect(lines.contains("Content-Length: 0"))
    }

    /// A WebSocket upgrade answered with a redirect fails, and the client goes nowhere else: lws
    /// followed it, with the socket's path and ticket, to wherever `Location` pointed.
    @Test func aWebSocketUpgradeAnsweredWithARedirectIsNotFollowed() async throws {
        let elsewhere = try Listener(backlog: 4)
        let server = try OneAnswerServer(
            answer: Array("HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:\(elsewhere.port)/ws/orders/?ticket=t\r\nContent-Length: 0\r\n\r\n".utf8))
        let loop = try WebSocketClientLoop()
        defer { loop.shutdown() }
        await #expect(throws: WebSocketClientError.self) {
            _ = try await WebSocketClient.connect(
                host: "127.0.0.1", port: server.port, path: "/ws/orders/?ticket=t", on: loop, timeout: .seconds(5))
        }
        server.finished()
        var wait = pollfd(fd: elsewhere.fd, events: Int16(POLLIN), revents: 0)
        #expect(poll(&wait, 1, 300) == 0, "no connection to the redirect's target")
    }

    /// A port no TCP address has is refused before anything is sent (past 2³¹ it trapped on the
    /// WebSocket side; glibc's resolver truncated it to a real port on the HTTP side).
    @Test func aPortOutOfRangeIsRefused() async throws {
        for text in ["http://127.0.0.1:70000/", "http://127.0.0.1:4294975376/"] {
            guard let url = URL(string: text), url.port != nil else { continue }  // a URL parser that refuses it is fine too
            let error = await #expect(throws: HTTPClient.Failure.self) {
                _ = try await HTTPClient.send(method: "GET", url: url, timeout: .seconds(1))
            }
            #expect(error?.description.contains("out of range") == true, "\(text): \(String(describing: error))")
        }
    }
}
