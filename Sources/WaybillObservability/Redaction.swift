/// Removes secrets and free text from request targets before they are logged.
///
/// The access log shows a query value only for the arguments Waybill reads whose values are ids,
/// flags or filters (`loggedNames`); `q` (what a user typed) as its length; the secrets' values as
/// `[redacted]`; every other argument only by count, and the path up to its first character
/// Waybill's paths do not have (`redactedTarget`). A list of the secrets' names (how it was until 2026-12-05) showed whatever a
/// client put in an argument it did not name: `?apikey=`, `?auth=`, `?Token%20=`, a password in
/// a mistyped name (found by a review).
public enum Redaction {
    /// Query arguments whose values are credentials: lws's own log lines, free text, are redacted
    /// by these names (`LwsLog`), as the client's URLs are (`EventSocketRequest`).
    public static let secretNames: Set<String> = ["token", "ticket", "access_token", "password"]
    /// Query arguments whose values are what a user typed (a search: numbers and titles, which may
    /// name customers): only their length is logged. The panel searches as the user types, so every
    /// prefix of a search would otherwise be in the access log.
    static let textNames: Set<String> = ["q"]
    /// Query arguments Waybill reads whose values are logged as sent (ids, cursors, flags, filters):
    /// the order list's (`OrderListRequest`) and the socket's (`since`, `cursor`, `stream`).
    static let loggedNames: Set<String> = [
        "status", "limit", "driver_id", "before", "active", "updated_after", "ids", "since", "cursor", "stream",
    ]
    /// A logged value longer than this many Unicode scalars is cut (`ids` holds up to 100 ids).
    static let longestLoggedValue = 1_000

    /// `path?query` with the values of `loggedNames` as sent, those of `q` by their length in
    /// characters, the secrets' names (`secretNames`) with `[redacted]` for their values, and every
    /// other argument only counted (`[2 other args]`): its name too may be a secret, since lws
    /// reads `?SECRET;status=new` as an argument named `SECRET`, and `?token%3DSECRET` as one named
    /// `token_SECRET` (a review, 2026-12-07). Names match as the server reads them, exactly
    /// (`?Since=` is not read, so not shown). Shown values are percent-encoded again where they
    /// hold `%`, `&`, `=`, `#` or a space, so a decoded value cannot pass for another argument
    /// (`?status=x%26token%3Dabc` is not logged as `status=x&token=abc`). The path is cut at its
    /// first character Waybill's own paths do not have (`loggedPath`).
    public static func redactedTarget(path: String, query: [(name: String, value: String)]) -> String {
        let path = loggedPath(path)
        guard !query.isEmpty else { return path }
        var others = 0
        var parts: [String] = []
        for item in query {
            if textNames.contains(item.name) {
                parts.append("\(item.name)=[\(item.value.count) chars]")
            } else if secretNames.contains(item.name) {
                parts.append("\(item.name)=[redacted]")
            } else if loggedNames.contains(item.name) {
                let scalars = item.value.unicodeScalars
                guard scalars.count > longestLoggedValue else {
                    parts.append("\(item.name)=\(encoded(item.value))")
                    continue
                }
                let kept = String(String.UnicodeScalarView(scalars.prefix(longestLoggedValue)))
                parts.append("\(item.name)=\(encoded(kept))…[\(scalars.count) scalars]")
            } else {
                others += 1
            }
        }
        if others > 0 { parts.append("[\(others) other arg\(others == 1 ? "" : "s")]") }
        return path + "?" + parts.joined(separator: "&")
    }

    /// `path` up to its first character outside `[A-Za-z0-9/._~-]`, then how many bytes were left
    /// out (`/ws/orders/…[20 bytes]`). lws hands the path over decoded, so a client that encoded
    /// the query's `?` (`/ws/orders/%3Fticket=…`, as `URL.appendingPathComponent` does) had its
    /// ticket logged whole (a review, 2026-12-07). Waybill's own paths have no other character.
    public static func loggedPath(_ path: String) -> String {
        // Every request's access line asks: the path's bytes are read in place, once.
        var bytes = path
        guard let (kept, total) = bytes.withUTF8({ b in b.firstIndex { !isPathByte($0) }.map { ($0, b.count) } }) else {
            return path
        }
        let cut = path.utf8.index(path.utf8.startIndex, offsetBy: kept)
        return String(path[..<cut]) + "…[\(total - kept) bytes]"
    }

    private static func isPathByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "/"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "-"):
            return true
        default:
            return false
        }
    }

    private static func encoded(_ text: String) -> String {
        guard text.utf8.contains(where: { [0x25, 0x26, 0x3d, 0x23, 0x20].contains($0) }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "%": out += "%25"
            case "&": out += "%26"
            case "=": out += "%3D"
            case "#": out += "%23"
            case " ": out += "%20"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
