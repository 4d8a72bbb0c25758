import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns a host name into an address literal before lws sees it: lws resolves with blocking
/// `getaddrinfo` on its service thread (no async DNS in Debian's build), which would stall every
/// socket, so resolution runs on a throwaway thread instead, within the connect's deadline.
enum HostResolver {
    /// - Throws: `WebSocketClientError(.connectFailed)` when the name does not resolve, or when
    ///   `limit` passes first (the lookup's thread then ends by itself: `OwnThread`).
    static func resolve(_ host: String, within limit: Duration) async throws -> String {
        if host == "localhost" { return "127.0.0.1" }
        if isLiteral(host) { return host }
        return try await OwnThread.run(
            within: limit, timedOut: { WebSocketClientError(.connectFailed, "timed out resolving \(host)") }
        ) { try lookUp(host) }
    }

    /// The first IPv4 address of `host` (blocking).
    private static func lookUp(_ host: String) throws -> String {
        var hints = addrinfo()
        hints.ai_family = AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else {
            throw WebSocketClientError(.connectFailed, "cannot resolve \(host)")
        }
        defer { freeaddrinfo(result) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let ok = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
            var address = sin.pointee.sin_addr
            return inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { throw WebSocketClientError(.connectFailed, "cannot resolve \(host)") }
        let end = buffer.firstIndex(of: 0) ?? buffer.count
        return String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
