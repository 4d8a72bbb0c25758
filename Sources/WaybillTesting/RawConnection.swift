import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A blocking TCP client for tests: send raw bytes, read HTTP/1.1 responses and WebSocket frames.
///
/// Every read is bounded by `timeout`. Not thread-safe: one thread at a time may use it (handing it
/// from one `runBlocking` body to the next is fine).
/// ```swift
/// let c = try RawConnection(port: server.port)
/// try c.send(RawConnection.request("GET", "/health"))
/// let r = try c.readResponse()          // r.status == 200
/// ```
/// WebSocket helpers live in `RawConnection+WebSocket.swift`.
// @unchecked: safe to hand between threads (runBlocking), never used by two at once.
public final class RawConnection: @unchecked Sendable {
    private var fd: Int32
    /// Bytes read from the socket but not consumed yet.
    private var buffer: [UInt8] = []
    private var sawEOF = false
    /// The limit of each blocking read call.
    public var timeout: Duration
    /// The socket, for tests that look at it with their own calls (`setsockopt`, `poll`,
    /// `recvmsg` with `MSG_PEEK`); reading from it directly would bypass `buffer`.
    public var fileDescriptor: Int32 { fd }

    /// Connects to `host:port` (an IPv4 literal).
    /// - Parameters:
    ///   - timeout: how long a read waits. Generous: a CI runner busy with the parallel suite has
    ///     stalled a plain GET past 5 s (2026-12-04); tests of "nothing comes" pass their own.
    ///   - receiveBufferSize: sets `SO_RCVBUF` before connecting (small values make slow-consumer
    ///     tests quick).
    ///   - sourceAddress: a local IPv4 address to connect from, e.g. `127.0.0.2` (all of 127/8 is
    ///     loopback on Linux): tests of per-client-address behaviour look like distinct clients.
    /// - Throws: `RawConnectionError.connectFailed` if the connection fails.
    public init(
        host: String = "127.0.0.1",
        port: Int,
        timeout: Duration = .seconds(20),
        receiveBufferSize: Int? = nil,
        sourceAddress: String? = nil
    ) throws {
        self.timeout = timeout
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw RawConnectionError.connectFailed(errno) }
        if var size = receiveBufferSize.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let sourceAddress {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            let socketFD = fd
            guard inet_pton(AF_INET, sourceAddress, &local.sin_addr) == 1,
                withUnsafePointer(to: &local, {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                    }
                }) == 0
            else {
                let code = errno
                Glibc.close(fd)
                fd = -1  // or deinit closes the number again, maybe another thread's file by then
                throw RawConnectionError.connectFailed(code == 0 ? EINVAL : code)
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            Glibc.close(fd)
            fd = -1  // or deinit closes the number again, maybe another thread's file by then
            throw RawConnectionError.connectFailed(EINVAL)
        }
        let socketFD = fd
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            fd = -1  // or deinit closes the number again, maybe another thread's file by then
            throw RawConnectionError.connectFailed(code)
        }
    }

    deinit { close() }

    /// Closes the socket (idempotent).
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// Shuts down the sending side (the peer reads EOF); reading stays possible.
    public func shutdownWrite() { if fd >= 0 { Glibc.shutdown(fd, Int32(SHUT_WR)) } }

    // MARK: Sending

    /// Sends all of `bytes`.
    /// - Throws: `RawConnectionError.closed` if the peer has gone.
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                if n < 0 && errno == EINTR { continue }
                throw RawConnectionError.closed
            }
            offset += n
        }
    }

    /// Sends the UTF-8 bytes of `text` as they are (write `\r\n` yourself).
    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Builds request bytes: request line, `Host`, `headers`, `Content-Length` when `body` is not
    /// nil, a blank line, then the body.
    public static func request(
        _ method: String,
        _ target: String,
        headers: [(String, String)] = [],
        body: [UInt8]? = nil
    ) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    // MARK: Reading bytes

    /// Waits for more bytes; false at EOF. Throws `.timeout` once `deadline` passes.
    private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
        if sawEOF || fd < 0 { return false }
        while true {
            let left = deadline - .now
            guard left > .zero else { throw RawConnectionError.timeout }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = min(
                left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1,
                60_000
            )
            let ready = poll(&poller, 1, Int32(ms))
            if ready <= 0 { continue }  // EINTR or nothing yet: the loop re-checks the deadline
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && (errno == EINTR || errno == EAGAIN) { continue }
            if n <= 0 {
                sawEOF = true  // EOF, or ECONNRESET and friends: closed either way
                return false
            }
            buffer += chunk[0..<n]
            return true
        }
    }

    /// Reads exactly `count` bytes.
    /// - Throws: `.closed` at an early EOF, `.timeout`.
    public func readBytes(_ count: Int) throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while buffer.count < count {
            guard try fill(until: deadline) else { throw RawConnectionError.closed }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer[0..<count])
    }

    /// Reads one line ending in CRLF and returns it without the CRLF.
    public func readLine() throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let i = buffer.firstIndex(of: 10), i > 0, buffer[i - 1] == 13 {
                let line = String(decoding: buffer[0..<(i - 1)], as: UTF8.self)
                buffer.removeFirst(i + 1)
                return line
            }
            guard try fill(until: deadline) else { throw RawConnectionError.closed }
        }
    }

    /// Reads until the peer closes and returns what came (including unread buffered bytes).
    /// - Throws: `.timeout` if the connection stays open past `timeout` (default: `self.timeout`).
    public func readUntilClose(timeout: Duration? = nil) throws -> [UInt8] {
        let deadline = ContinuousClock.now + (timeout ?? self.timeout)
        while try fill(until: deadline) {}
        defer { buffer = [] }
        return buffer
    }

    /// Whether the peer closed within `timeout`; bytes that arrive meanwhile are discarded.
    public func waitForClose(timeout: Duration) -> Bool {
        (try? readUntilClose(timeout: timeout)) != nil
    }

    // MARK: HTTP

    /// Reads one response framed by Content-Length, chunked encoding, or the close of the
    /// connection. Responses to `HEAD` (pass `forHEAD`) and 1xx/204/304 have no body.
    public func readResponse(forHEAD: Bool = false) throws -> RawHTTPResponse {
        let statusLine = try readLine()
        let parts = statusLine.split(separator: " ", maxSplits: 2)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/"), let status = Int(parts[1]) else {
            throw RawConnectionError.malformed(statusLine)
        }
        var headers: [(name: String, value: String)] = []
        while true {
            let line = try readLine()
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: ":") else { throw RawConnectionError.malformed(line) }
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((line[..<colon].lowercased(), value))
        }
        var response = RawHTTPResponse(status: status, headers: headers, body: [])
        if forHEAD || status == 204 || status == 304 || (100..<200).contains(status) { return response }
        if response.header("transfer-encoding")?.lowercased().contains("chunked") == true {
            while true {
                let sizeLine = try readLine()
                let sizeText = sizeLine.split(separator: ";").first.map(String.init) ?? ""
                guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                    throw RawConnectionError.malformed(sizeLine)
                }
                if size == 0 {
                    while try !readLine().isEmpty {}  // trailers
                    break
                }
                response.body += try readBytes(size)
                _ = try readBytes(2)
            }
        } else if let length = response.header("content-length").flatMap({ Int($0) }) {
            response.body = try readBytes(length)
        } else if response.header("connection")?.lowercased() == "close" {
            response.body = try readUntilClose()
        }
        return response
    }

    /// Reads `count` responses in order (pipelining).
    public func readResponses(_ count: Int) throws -> [RawHTTPResponse] {
        try (0..<count).map { _ in try readResponse() }
    }
}

/// One HTTP response as `RawConnection` read it.
public struct RawHTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields, names lower-cased, in arrival order.
    public var headers: [(name: String, value: String)]
    /// The body, de-chunked.
    public var body: [UInt8]

    /// Makes a response value (tests that fake one).
    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first value of header `name` (any case).
    public func header(_ name: String) -> String? {
        let key = name.lowercased()
        return headers.first { $0.name == key }?.value
    }

    /// The body as UTF-8 text.
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why a `RawConnection` call failed.
public enum RawConnectionError: Error, Equatable {
    /// `connect` failed with this errno.
    case connectFailed(Int32)
    /// Nothing (or not enough) arrived in time.
    case timeout
    /// The peer closed the connection.
    case closed
    /// The bytes were not what the protocol allows.
    case malformed(String)
}
