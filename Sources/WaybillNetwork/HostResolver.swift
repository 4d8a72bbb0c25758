import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Turns a host name into an address literal before lws sees it: lws resolves with blocking
/// `getaddrinfo` on its service thread (no async DNS in Debian's build), which would stall every
/// socket, so resolution runs on a throwaway thread instead.
enum HostResolver {
    static func resolve(_ host: String) async throws -> String {
        if host == "localhost" { return "127.0.0.1" }
        if isLiteral(host) { return host }
        return try await withCheckedThrowingContinuation { continuation in
            Thread {
                var hints = addrinfo()
                hints.ai_family = AF_INET
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var result: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else {
                    continuation.resume(throwing: WebSocketClientError(.connectFailed, "cannot resolve \(host)"))
                    return
                }
                defer { freeaddrinfo(result) }
                var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
                let ok = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var address = sin.pointee.sin_addr
                    return inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)) != nil
                }
                if ok {
                    let end = buffer.firstIndex(of: 0) ?? buffer.count
                    continuation.resume(
                        returning: String(decoding: buffer[..<end].map { UInt8(bitPattern: $0) }, as: UTF8.self)
                    )
                } else {
                    continuation.resume(throwing: WebSocketClientError(.connectFailed, "cannot resolve \(host)"))
                }
            }.start()
        }
    }

    private static func isLiteral(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}
