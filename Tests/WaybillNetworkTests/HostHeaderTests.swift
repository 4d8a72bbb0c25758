import Foundation
import Synchronization
import Testing

@testable import WaybillNetwork
import WaybillTesting

/// The `Host` header the clients send: the host with its port, an IPv6 literal in brackets
/// (RFC 9110 §7.2). `URL.host` gives `::1` without them, and `Host: ::1:8080` cannot be read back;
/// the WebSocket upgrade sent the host without its port.
@Suite(.timeLimit(.minutes(1)))
struct HostHeaderTests {
    @Test func namesAreBracketedWhenTheyAreIPv6LiteralsAndAlwaysCarryThePort() {
        #expect(HostHeader.value(host: "::1", port: 8080) == "[::1]:8080")
        #expect(HostHeader.value(host: "[::1]", port: 8080) == "[::1]:8080")
        #expect(HostHeader.value(host: "fe80::1%eth0", port: 80) == "[fe80::1]:80", "no zone id (RFC 6874 §4)")
        #expect(HostHeader.value(host: "[fe80::1%25eth0]", port: 80) == "[fe80::1]:80")
        #expect(HostHeader.value(host: "127.0.0.1", port: 9) == "127.0.0.1:9")
        #expect(HostHeader.value(host: "waybill.example", port: 443) == "waybill.example:443")
    }

    /// Whether this machine can listen on `::1` (a machine with IPv6 turned off cannot: the tests
    /// that need it are skipped there, not failed).
    static let hasIPv6Loopback: Bool = {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_addr = in6addr_loopback
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) == 0 }
        }
    }()

    @Test(.enabled(if: hasIPv6Loopback)) func theHTTPClientSendsAnIPv6LiteralInBrackets() async throws {
        try await withServer({ $0.host = "::1" }) { server in
            let response = try await HTTPClient.send(
                method: "GET", url: URL(string: "http://[::1]:\(server.port)/x")!, timeout: .seconds(20))
            #expect(response.status == 200)
            #expect(try Echo(response.body).headers["host"] == "[::1]:\(server.port)")
        }
    }

    @Test func theWebSocketUpgradeCarriesThePortAndBracketsAnIPv6Literal() async throws {
        let loop = try WebSocketClientLoop()
        for host in ["127.0.0.1"] + (Self.hasIPv6Loopback ? ["::1"] : []) {
            let recorder = HostRecorder()
            try await withServer({ $0.host = host }, delegate: recorder) { server in
                let client = try await WebSocketClient.connect(
                    host: host, port: server.port, path: "/ws/orders/", on: loop, timeout: .seconds(20))
                #expect(await eventually { recorder.hosts.withLock { $0.count } == 1 })
                let expected = host.contains(":") ? "[\(host)]:\(server.port)" : "\(host):\(server.port)"
                #expect(recorder.hosts.withLock { $0 } == [expected])
                client.close()
            }
        }
    }
}

/// Notes the `Host` header of each socket that opens.
private final class HostRecorder: WebSocketDelegate {
    let hosts = Mutex<[String?]>([])
    func socketOpened(_ socket: SocketID, request: HTTPRequest, io: any SocketIO) {
        hosts.withLock { $0.append(request.headers["host"]) }
    }
    func socketReceived(_ socket: SocketID, text: String, io: any SocketIO) {}
    func socketReceived(_ socket: SocketID, binary: [UInt8], io: any SocketIO) {}
    func socketClosed(_ socket: SocketID, close: WebSocketClose, io: any SocketIO) {}
}
