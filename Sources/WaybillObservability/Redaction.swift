/// Removes secrets and free text from request targets before they are logged.
///
/// The access log shows a query value only for the arguments Waybill reads whose values are ids,
/// flags or filters (`loggedNames`); `q` (what a user typed) as its length; every other value as
/// `[redacted]`. A list of the secrets' names (how it was until 2026-12-05) showed whatever a
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
    /// characters, and every other value (`token`, `ticket`, any name Waybill does not read)
    /// replaced by `[redacted]`. Names match as the server reads them, exactly (`?Since=` is not
    /// read, so not shown). Names and shown values are percent-encoded again where they hold `%`,
    /// `&`, `=`, `#` or a space, so a decoded value cannot pass for another argument
    /// (`?status=x%26token%3Dabc` is not logged as `status=x&token=abc`).
    public static func redactedTarget(path: String, query: [(name: String, value: String)]) -> String {
        guard !query.isEmpty else { return path }
        let parts = query.map { item in
            let name = encoded(item.name)
            if textNames.contains(item.name) { return "\(name)=[\(item.value.count) chars]" }
            guard loggedNames.contains(item.name) else { return "\(name)=[redacted]" }
            let scalars = item.value.unicodeScalars
            guard scalars.count > longestLoggedValue else { return "\(name)=\(encoded(item.value))" }
            let kept = String(String.UnicodeScalarView(scalars.prefix(longestLoggedValue)))
            return "\(name)=\(encoded(kept))…[\(scalars.count) scalars]"
        }
        return path + "?" + parts.joined(separator: "&")
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
