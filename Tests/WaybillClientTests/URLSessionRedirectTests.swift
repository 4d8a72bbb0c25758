import Foundation
import Glibc
import Synchronization
import Testing

@testable import WaybillClient

/// `URLSession` followed a redirect to another host with the `Authorization` header (measured:
/// a 302 to another port received `Bearer …`). The transport follows none: the 3xx is the answer.
@Suite(.timeLimit(.minutes(1)))
struct URLSessionRedirectTests {
    /// A loopback listener that answers every connection with `answer` and records what it read.
    final class Listener: Sendable {
        let port: Int
        private let descriptor: Int32
        private let received: Box

        init(answer: @escaping @Sendable (Int) -> String) throws {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0, Glibc.listen(fd, 8) == 0 else { throw POSIXError(.EADDRINUSE) }
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            _ = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            }
            descriptor = fd
            port = Int(UInt16(bigEndian: address.sin_port))
            let received = Box(), port = self.port
            self.received = received
            Thread.detachNewThread {
                while true {
                    let connection = accept(fd, nil, nil)
                    guard connection >= 0 else { return }  // closed
                    var buffer = [UInt8](repeating: 0, count: 8192)
                    let count = read(connection, &buffer, buffer.count)
                    received.lines.withLock { $0.append(String(decoding: buffer.prefix(max(0, count)), as: UTF8.self)) }
                    let reply = Array(answer(port).utf8)
                    _ = reply.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                    close(connection)
                }
            }
        }

        var requests: [String] { received.lines.withLock { $0 } }

        final class Box: Sendable { let lines = Mutex<[String]>([]) }
        func stop() { shutdown(descriptor, Int32(SHUT_RDWR)); close(descriptor) }
    }

    @Test func aRedirectToAnotherHostIsNotFollowedAndTheTokenStaysHome() async throws {
        let elsewhere = try Listener { _ in "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[]" }
        defer { elsewhere.stop() }
        let redirecting = try Listener { _ in
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:\(elsewhere.port)/api/orders/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        }
        defer { redirecting.stop() }
        let transport = URLSessionHTTPTransport()
        let response = try await transport.send(
            APIRequest(
                method: "GET", url: URL(string: "http://127.0.0.1:\(redirecting.port)/api/orders/")!,
                headers: ["Authorization": "Bearer secret-token"], body: nil))
        #expect(response.status == 302)
        #expect(redirecting.requests.count == 1)
        try await Task.sleep(for: .milliseconds(200))
        #expect(elsewhere.requests.isEmpty, "followed: \(elsewhere.requests)")
    }
}
