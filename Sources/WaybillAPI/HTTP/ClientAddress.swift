public import WaybillNetwork

/// The address a request came from, for the login throttle and the logs.
///
/// The socket's peer, unless that peer is a reverse proxy the operator named
/// (`ServerConfiguration.trustedProxies`): then the last `X-Forwarded-For` entry, the one that proxy
/// appended (nginx: `proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for`). Entries before
/// it are whatever the client sent and are never used. Behind a proxy without this, every client
/// shares the proxy's address, and 50 failed logins from anyone would refuse logins for everyone.
public struct ClientAddress: Sendable {
    let trustedProxies: Set<String>

    public init(trustedProxies: Set<String>) { self.trustedProxies = trustedProxies }

    public func of(_ request: HTTPRequest) -> String {
        guard trustedProxies.contains(request.remoteAddress),
            let forwarded = request.headers["x-forwarded-for"],
            let last = forwarded.split(separator: ",").last.map({ Self.trimmed($0) }),
            Self.looksLikeAddress(last)
        else { return request.remoteAddress }
        return last.hasPrefix("::ffff:") ? String(last.dropFirst(7)) : String(last)
    }

    private static func trimmed(_ text: Substring) -> Substring {
        var text = text
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }

    /// Whether `text` can be an IP address literal (the `--trusted-proxy` check).
    public static func isAddress(_ text: String) -> Bool { looksLikeAddress(Substring(text)) }

    /// An IPv4 or IPv6 literal's characters only, at most 45 of them: anything else (a name, an
    /// `unknown`, a port, garbage) falls back to the proxy's own address.
    static func looksLikeAddress(_ text: Substring) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 45 else { return false }
        return text.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isASCIIHexDigit || scalar == "." || scalar == ":"
        } && text.contains(where: { $0 == "." || $0 == ":" })
    }
}
