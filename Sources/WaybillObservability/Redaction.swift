/// Removes secrets and free text from request targets before they are logged.
///
/// The access log shows a query value only for the arguments Waybill reads whose values are ids,
/// flags or filters (`loggedNames`); `q` (what a user typed) as its length; every other value as
/// `[redacted]`. A list of the secrets' names (how it was until 2026-12-05) showed whatever a
/// client put in an argument it did not name: `?apikey=`, `?auth=`, `?Token%20=`, a password in
/// a mistyped name (found by a review).
public enum Redaction {
    /// Query arguments whose values are credentials (named in the client's and lws's redaction too).
    static let secretNames: Set<String> = ["token", "ticket", "access_token", "password"]
    /// Query arguments whose values are what a user typed (a search: numbers and titles, which may
    /// name customers): only their length is logged. The panel searches as the user types, so every
    /// prefix of a search would otherwise be in the access log.
    static let textNames: Set<String> = ["q"]
    /// Query arguments Waybill reads whose values are logged as sent (ids, cursors, flags, filters):
    /// the order list's (`OrderListRequest`) and the socket's (`since`, `cursor`, `stream`).
    static let loggedNames: Set<String> = [
        "status", "limit", "driver_id", "before", "active", "updated_after", "ids", "since", "cursor", "stream",
    ]
    /// A logged value longer than this is cut (`ids` holds up to 100 ids).
    static let longestLoggedValue = 1_000

    /// `path?query` with the values of `loggedNames` as sent, those of `q` by their length in
    /// characters, and every other value (`token`, `ticket`, any name Waybill does not read)
    /// replaced by `[redacted]`.
    public static func redactedTarget(path: String, query: [(name: String, value: String)]) -> String {
        guard !query.isEmpty else { return path }
        let parts = query.map { item in
            let name = item.name.lowercased()
            if textNames.contains(name) { return "\(item.name)=[\(item.value.count) chars]" }
            guard loggedNames.contains(name) else { return "\(item.name)=[redacted]" }
            guard item.value.utf8.count > longestLoggedValue else { return "\(item.name)=\(item.value)" }
            return "\(item.name)=\(item.value.prefix(longestLoggedValue))…[\(item.value.count) chars]"
        }
        return path + "?" + parts.joined(separator: "&")
    }
}
