public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A small HTTP/1.1 client over plain sockets, one connection per request, each on its own thread.
///
/// Why not `URLSession`: on Linux, cancelling a task that awaits `URLSession.data(for:)` can
/// deadlock the process (FoundationNetworking cancels with `DispatchQueue.sync` while the task's
/// status lock is held, and its completion needs that lock). Here cancellation never reaches the
/// socket: a cancelled caller simply gets its answer late and drops it. Plain `http://` only.
public enum HTTPClient {
    /// What came back.
    public struct Response: Sendable {
        public var status: Int
        /// Header fields with lower-cased names.
        public var headers: [String: String]
        public var body: [UInt8]
    }

    /// A transport-level failure (connection refused, timeout, malformed answer).
    public struct Failure: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    /// Sends one request to `url` (`http://host:port/path?query`) and reads the whole answer.
    public static func send(
        method: String, url: URL, headers: [(String, String)] = [], body: [UInt8]? = nil,
        timeout: Duration = .seconds(30)
    ) async throws -> Response {
        guard url.scheme == "http", let host = url.host else { throw Failure(description: "only http:// URLs are supported") }
        let port = url.port ?? 80
        guard (1...65_535).contains(port) else { throw Failure(description: "port \(port) is out of range") }
        // The path as written: `url.path` decodes its escapes (a `%2F` became a separator, a `%20`
        // a space in the request line) and drops a trailing slash (found by a review, 2026-12-07).
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true) else {
            throw Failure(description: "cannot read the URL's path")
        }
        var target = components.percentEncodedPath
        if target.isEmpty { target = "/" }
        if let query = components.percentEncodedQuery { target += "?" + query }
        var head = "\(method) \(target) HTTP/1.1\r\nHost: \(HostHeader.value(host: host, port: port))\r\nConnection: close\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        // A POST without a body says so too: some proxies answer 411 to one without a length.
        if let body { head += "Content-Length: \(body.count)\r\n" } else if method != "GET" && method != "HEAD" && method != "DELETE" {
            head += "Content-Length: 0\r\n"
        }
        let bytes = Array((head + "\r\n").utf8) + (body ?? [])
        // The socket's own deadline ends every connect, read and write; the bound here, a little
        // later, ends what it cannot: the name lookup (`OwnThread`).
        return try await OwnThread.run(
            within: timeout + .seconds(1),
            timedOut: { Failure(description: "no answer within the request's time (the name lookup or the thread was late)") }
        ) {
            let socket = try ClientSocket(host: host, port: port, timeout: timeout)
            defer { socket.close() }
            try socket.write(bytes)
            return try ResponseParser.parse(socket.readAll(forHEAD: method == "HEAD"), forHEAD: method == "HEAD")
        }
    }

}

/// The `Host` header a client sends (RFC 9110 §7.2): the host and its port, an IPv6 literal in
/// brackets, without a zone id (RFC 6874 §4: it means something on the sending machine only).
/// `URL.host` gives a literal without its brackets (`::1`), and `Host: ::1:8080` cannot be read
/// back (a review, 2026-12-07); the WebSocket upgrade sent the host alone, without its port.
enum HostHeader {
    static func value(host: String, port: Int) -> String {
        var name = host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        if name.contains(":") {
            if let zone = name.firstIndex(of: "%") { name = String(name[..<zone]) }
            name = "[" + name + "]"
        }
        return name + ":" + String(port)
    }
}

/// A blocking TCP connection with a deadline on every read and write.
private final class ClientSocket {
    private var fd: Int32 = -1
    private let deadline: ContinuousClock.Instant

    init(host: String, port: Int, timeout: Duration) throws {
        deadline = .now + timeout
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let name = host == "localhost" ? "127.0.0.1" : host
        guard getaddrinfo(name, String(port), &hints, &list) == 0, let first = list else {
            throw HTTPClient.Failure(description: "cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry, ContinuousClock.now < deadline {
            fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            // Linux's `connect` gives up after `SO_SNDTIMEO` (EINPROGRESS): set before it, a server
            // whose address drops SYNs (a firewall, a dead node behind a virtual IP) fails at the
            // deadline. Set after it, the kernel's SYN retries held the thread and its descriptor
            // for about two minutes, past the session's stop (found by a review, 2026-12-05).
            if fd >= 0 {
                Self.setTimeouts(fd, deadline - .now)
                if connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 { break }
                Glibc.close(fd)
            }
            fd = -1
            entry = info.pointee.ai_next
        }
        guard fd >= 0 else { throw HTTPClient.Failure(description: "cannot connect to \(host):\(port)") }
        Self.setTimeouts(fd, deadline - .now)
    }

    /// Send and receive timeouts of `left`, at least 1 ms: a `timeval` of 0 means no timeout at all,
    /// and a timeout under a second (whole seconds were taken) waited for ever.
    private static func setTimeouts(_ fd: Int32, _ left: Duration) {
        let microseconds = max(1_000, left.components.seconds * 1_000_000 + left.components.attoseconds / 1_000_000_000_000)
        var value = timeval(tv_sec: Int(microseconds / 1_000_000), tv_usec: Int(microseconds % 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    func write(_ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw HTTPClient.Failure(description: "send failed (errno \(errno))") }
            sent += n
        }
    }

    /// Everything until the server closes (requests carry `Connection: close`).
    func readAll(forHEAD: Bool) throws -> [UInt8] {
        var data: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let now = ContinuousClock.now
            guard now < deadline else { throw HTTPClient.Failure(description: "timed out") }
            Self.setTimeouts(fd, deadline - now)  // each wait only what is left of the whole
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw HTTPClient.Failure(description: "timed out") }
            // A reset (a server or proxy dying mid-answer) is a failure, not the answer's end: what
            // came so far was returned as if complete (found by a review, 2026-12-07). Unless the
            // answer is whole by its own framing: a proxy that answers early (a 413 before reading
            // the body) and closes with the body unread sends a reset after its answer.
            if n < 0 {
                let reason = errno
                if ResponseParser.isWhole(data, forHEAD: forHEAD) { return data }
                throw HTTPClient.Failure(description: "the connection broke (errno \(reason))")
            }
            if n == 0 { return data }
            data += chunk[0..<n]
        }
    }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }
}

/// Parses a complete close-delimited answer: status line, headers, body by Content-Length,
/// chunked framing, or to the end.
enum ResponseParser {
    static func parse(_ data: [UInt8], forHEAD: Bool) throws -> HTTPClient.Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        var start = data.startIndex
        while true {
            guard let end = data[start...].firstRange(of: separator) else {
                throw HTTPClient.Failure(description: "incomplete response")
            }
            let head = String(decoding: data[start..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = head.first?.split(separator: " ") ?? []
            guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
                throw HTTPClient.Failure(description: "malformed status line")
            }
            // An interim answer (`100 Continue`, `103 Early Hints`, which a proxy may send) comes
            // before the real one: it was taken as the answer, with the real one as its body (a
            // review, 2026-12-07). A 101 is no answer to a plain request: kept, and fails as any other.
            if (100...199).contains(status), status != 101 {
                start = end.upperBound
                continue
            }
            return try answer(status: status, head: head, body: Array(data[end.upperBound...]), forHEAD: forHEAD)
        }
    }

    /// Whether `data` holds a whole answer by its framing (a length, chunks, or no body), so that
    /// what follows it on the connection cannot change it.
    static func isWhole(_ data: [UInt8], forHEAD: Bool) -> Bool {
        guard let answer = try? parse(data, forHEAD: forHEAD) else { return false }
        if forHEAD || answer.status == 204 || answer.status == 304 { return true }
        return answer.headers["content-length"] != nil || answer.headers["transfer-encoding"]?.lowercased().contains("chunked") == true
    }

    private static func answer(status: Int, head: [String], body: [UInt8], forHEAD: Bool) throws -> HTTPClient.Response {
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = body
        if forHEAD || status == 204 || status == 304 {
            body = []
        } else if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
            body = try dechunk(body)
        } else if let length = headers["content-length"].flatMap(Int.init) {
            // A negative length (which `Int.init` accepts) used to trap on `0..<length`.
            guard length >= 0 else { throw HTTPClient.Failure(description: "malformed Content-Length") }
            guard length <= body.count else {
                throw HTTPClient.Failure(description: "the answer was cut short: \(body.count) of \(length) bytes")
            }
            body = Array(body[0..<length])
        }
        return HTTPClient.Response(status: status, headers: headers, body: body)
    }

    private static func dechunk(_ data: [UInt8]) throws -> [UInt8] {
        var out: [UInt8] = [], index = 0
        while let lineEnd = data[index...].firstRange(of: [13, 10]) {
            let sizeText = String(decoding: data[index..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";").first ?? ""
            // Hex digits only: `Int(_:radix:)` also takes a sign, and "-5" used to trap on a negative
            // range; at most 15 digits, so `start + size` cannot overflow.
            let digits = sizeText.trimmingCharacters(in: .whitespaces)
            guard (1...15).contains(digits.utf8.count), digits.allSatisfy(\.isHexDigit),
                let size = Int(digits, radix: 16)
            else { break }
            if size == 0 { return out }
            let start = lineEnd.upperBound
            guard size <= data.count - start else { throw HTTPClient.Failure(description: "truncated chunk") }
            out += data[start..<start + size]
            index = start + size + 2
            guard index <= data.count else { break }
        }
        throw HTTPClient.Failure(description: "malformed chunked body")
    }
}
