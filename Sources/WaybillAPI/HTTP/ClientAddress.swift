public import WaybillNetwork
import Glibc

/// The address a request came from, for the login throttle and the logs.
///
/// The socket's peer, unless that peer is a reverse proxy the operator named
/// (`ServerConfiguration.trustedProxies`): then the last `X-Forwarded-For` entry, the one that proxy
/// appended (nginx: `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`). Entries before
/// it are whatever the client sent and are never used. Behind a proxy without this, every client
/// shares the proxy's address, and 50 failed logins from anyone would refuse logins for everyone.
public struct ClientAddress: Sendable {
    let trustedProxies: Set<String>

    /// `trustedProxies` are normalized as the server writes peers (`normalized(_:)`).
    public init(trustedProxies: Set<String>) {
        self.trustedProxies = Set(trustedProxies.map { Self.normalized($0) ?? $0 })
    }

    /// The last `X-Forwarded-For` entry, normalized, when the peer is a trusted proxy and the entry
    /// is an IP address; otherwise (no header, a name, `unknown`, a port, garbage) the peer itself.
    public func of(_ request: HTTPRequest) -> String {
        guard trustedProxies.contains(request.remoteAddress),
            let forwarded = request.headers["x-forwarded-for"],
            let last = forwarded.split(separator: ",").last,
            let address = Self.normalized(String(Self.trimmed(last)))
        else { return request.remoteAddress }
        return address
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }

    /// Whether `address` (as the server writes peers) is this machine's loopback: 127.0.0.0/8 or ::1.
    public static func isLoopback(_ address: String) -> Bool {
        guard let written = normalized(address) else { return false }
        return written == "::1" || written.hasPrefix("127.")
    }

    /// Whether `text` can be an IP address literal (the `--trusted-proxy` check).
    public static func isAddress(_ text: String) -> Bool { normalized(text) != nil }

    /// `text` written the way the server reports a peer (`inet_ntop`, IPv4-mapped IPv6 as IPv4),
    /// so `::ffff:127.0.0.1`, `0:0:0:0:0:0:0:1` or upper-case hex still match; `nil` if not an address.
    public static func normalized(_ text: String) -> String? {
        var v4 = in_addr(), v6 = in6_addr()
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        if inet_pton(AF_INET, text, &v4) == 1 {
            guard inet_ntop(AF_INET, &v4, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        } else if inet_pton(AF_INET6, text, &v6) == 1 {
            guard inet_ntop(AF_INET6, &v6, &buffer, socklen_t(buffer.count)) != nil else { return nil }
        } else {
            return nil
        }
        let written = String(cString: buffer)
        return written.hasPrefix("::ffff:") && written.contains(".") ? String(written.dropFirst(7)) : written
    }

    /// What the login throttle counts for `address`: an IPv4 address itself, an IPv6 address by its
    /// /64. One IPv6 subscriber usually holds a whole /64 (2^64 addresses), so counting /128s gave
    /// an attacker a fresh "clean" address for every guess at a locked email. Anything else (a
    /// name, "") is counted as given, as before.
    public static func throttleKey(_ address: String) -> String { prefixKey(address, bits: 64) }

    /// The block a locked email's tries are capped by (`LoginThrottle.passesPerWideBlock`): an IPv4
    /// address itself, an IPv6 address by its /48. A home line gets a /56 and a free tunnel a /48,
    /// that is 256 or 65 536 /64s: uncapped, each was a fresh try at a locked email, and guessing
    /// ran at the speed of the password checks (found by a review, 2026-12-04).
    public static func wideKey(_ address: String) -> String { prefixKey(address, bits: 48) }

    /// An IPv6 address's first `bits` (a multiple of 16) as `a:b:c::/bits`; anything else as given.
    private static func prefixKey(_ address: String, bits: Int) -> String {
        var v6 = in6_addr()
        guard address.contains(":"), inet_pton(AF_INET6, address, &v6) == 1 else { return address }
        let bytes = withUnsafeBytes(of: &v6) { Array($0.prefix(bits / 8)) }
        let groups = stride(from: 0, to: bytes.count, by: 2).map {
            String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
        }
        return groups.joined(separator: ":") + "::/\(bits)"
    }
}
