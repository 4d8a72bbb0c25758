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
        #expect(outcome == "failed", "got \(outcome)")
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
        #expect(outcome == "failed", "got \(outcome)")
        withExtendedLifetime(listener) {}
    }

    /// How `body` ended within `limit`: "failed" (threw), "answered", or "still waiting" (then its
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
                    finish(error is HTTPClient.Failure ? "failed" : "other error: \(error)")
                }
            }
            Task.detached {
                try? await Task.sleep(for: limit)
                finish("still waiting")
            }
        }
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
