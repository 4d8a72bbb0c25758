import WaybillBroker

/// Where Redis listens: `redis://host[:port][/db]`, parsed once at startup so a typo fails there.
///
/// Credentials and TLS are refused with a clear error rather than ignored: Debian's hiredis 0.14.1
/// has no TLS at all (notes §9), so Redis belongs on loopback or a private link.
struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    var host: String
    var port: Int
    /// The `SELECT`ed database. Pub/sub channels ignore it (they are server-wide); it is kept so a
    /// URL shared with other Redis users means the same server.
    var database: Int

    init(host: String, port: Int = 6379, database: Int = 0) {
        self.host = host
        self.port = port
        self.database = database
    }

    /// - Throws: `BrokerError` with a one-line reason.
    init(parsing text: String) throws(BrokerError) {
        func invalid(_ why: String) -> BrokerError { BrokerError("invalid Redis URL \"\(Self.shown(text))\": \(why)") }
        let scheme = "redis://"
        guard text.lowercased().hasPrefix(scheme) else {
            if text.lowercased().hasPrefix("rediss://") { throw invalid("TLS is not supported (hiredis 0.14)") }
            throw invalid("expected redis://host[:port][/db]")
        }
        var rest = Substring(text.dropFirst(scheme.count))
        var path: Substring = ""
        if let slash = rest.firstIndex(of: "/") {
            path = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
        }
        guard !rest.contains("@") else { throw invalid("credentials are not supported") }
        guard !rest.contains("?"), !path.contains("?") else { throw invalid("query parameters are not supported") }

        var hostPart = rest
        var portPart: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw invalid("unclosed [ in host") }
            hostPart = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw invalid("expected :port after ]") }
                portPart = after.dropFirst()
            }
        } else if let colon = rest.lastIndex(of: ":") {
            hostPart = rest[..<colon]
            portPart = rest[rest.index(after: colon)...]
        }
        guard !hostPart.isEmpty else { throw invalid("missing host") }
        guard hostPart.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == ":" }) else {
            throw invalid("bad host")
        }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else { throw invalid("bad port") }
            port = value
        } else {
            port = 6379
        }
        if path.isEmpty {
            database = 0
        } else {
            guard let value = Int(path), value >= 0, value < 1 << 20 else { throw invalid("bad database number") }
            database = value
        }
    }

    /// `text` as an error may show it: everything between `://` and the last `@` (a user and
    /// password) replaced by `…`, and a query or fragment (from `?` or `#`) too; when a `?` or `#`
    /// comes before that `@`, it cannot be told from a password's own, and all after `://` goes.
    /// Then at most 200 characters. The error goes to stderr and from there to the service's log.
    static func shown(_ text: String) -> String {
        // The last `@` anywhere, not only in the authority: a password may itself hold a `/`, a `?`
        // or a `#` (not encoded) or run past the 200 characters shown; and other Redis clients take
        // `?password=`, which may hold an `@` (found by reviews, 2026-12-03 and 2026-12-05).
        var shown = Array(text)
        let isQuery: (Character) -> Bool = { $0 == "?" || $0 == "#" }
        var start = 0
        if let colon = shown.firstIndex(of: ":"), shown[colon...].starts(with: "://") { start = colon + 3 }
        if let at = shown[start...].lastIndex(of: "@") {
            if shown[start..<at].contains(where: isQuery) {
                shown.replaceSubrange(start..., with: ["…"])
            } else {
                shown.replaceSubrange(start..<at, with: ["…"])
            }
        }
        if let query = shown[start...].firstIndex(where: isQuery) {
            shown.replaceSubrange((query + 1)..., with: ["…"])
        }
        return String(shown.prefix(200))
    }

    var description: String {
        let shownHost = host.contains(":") ? "[\(host)]" : host
        return "redis://\(shownHost):\(port)" + (database == 0 ? "" : "/\(database)")
    }
}
