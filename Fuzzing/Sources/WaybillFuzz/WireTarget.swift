import Foundation
import Glibc
import WaybillAPI

extension FuzzTarget {
    /// Raw bytes to the running server over loopback: the HTTP request reader (lws and
    /// `LwsRequestReader`), body framing, and with a WebSocket upgrade the frame reassembly and the hub.
    ///
    /// Byte 1 even: the rest is sent as is (`{TOKEN}` becomes the dispatcher's token).
    /// Byte 1 odd: line 1 is the upgrade's extra query (e.g. `cursor=0-00000000`); the harness
    /// upgrades with the dispatcher's token, then sends each further line as one masked frame
    /// whose first byte is the frame's first header byte (FIN, RSV, opcode) and the rest its payload.
    ///
    /// Checks: the server stays up (a crash kills this process) and never answers 5xx but 503.
    static let httpWire = FuzzTarget(name: "http-wire", summary: "raw bytes to a running server") { input in
        let fixture = ServerFixture.shared
        let token = String(fixture.authorization(1)!.dropFirst("Bearer ".count))
        let mode = input.byte()
        var bytes: [UInt8]
        if mode & 1 == 0 {
            bytes = Array(input.restText().replacingOccurrences(of: "{TOKEN}", with: token).utf8)
        } else {
            let query = input.line()
            bytes = Array(
                ("GET /ws/orders/?token=\(token)&\(query) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                    + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                    + "Sec-WebSocket-Version: 13\r\n\r\n").utf8)
            while !input.isEmpty {
                let line = input.lineBytes()
                bytes += WireTarget.maskedFrame(first: line.first ?? 0x81, payload: Array(line.dropFirst()))
            }
            bytes += WireTarget.maskedFrame(first: 0x88, payload: [0x03, 0xE8])  // close 1000
        }
        let answer = WireTarget.exchange(bytes, port: fixture.server.port)
        let text = String(decoding: answer, as: UTF8.self)
        for statusLine in text.components(separatedBy: "HTTP/1.1 ").dropFirst() where statusLine.hasPrefix("5") {
            FuzzCheck.expect(statusLine.hasPrefix("503"), "answered HTTP/1.1 \(statusLine.prefix(40))")
        }
    }
}

enum WireTarget {
    /// A client frame: masked (RFC 6455 §5.3) with a fixed key; lengths of every size class.
    static func maskedFrame(first: UInt8, payload: [UInt8]) -> [UInt8] {
        var frame = [first]
        if payload.count < 126 {
            frame.append(0x80 | UInt8(payload.count))
        } else {
            frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]
        }
        let key: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        frame += key
        frame += payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
        return frame
    }

    /// Connects, sends `bytes`, half-closes, and reads until the server closes (at most 2 s).
    static func exchange(_ bytes: [UInt8], port: Int) -> [UInt8] {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { fatalError("socket: \(errno)") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else { fatalError("the server does not accept connections any more (errno \(errno))") }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }  // the server closed early: fine, it may refuse what it read so far
            sent += n
        }
        shutdown(fd, Int32(SHUT_WR))
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while answer.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            answer += buffer[0..<n]
        }
        return answer
    }
}
