/// Removes secrets from request targets before they are logged.
public enum Redaction {
    /// Query arguments whose values are credentials.
    static let secretNames: Set<String> = ["token", "ticket", "access_token", "password"]

    /// `path?query` with the values of `token`, `ticket` (and similar) replaced by `[redacted]`.
    public static func redactedTarget(path: String, query: [(name: String, value: String)]) -> String {
        guard !query.isEmpty else { return path }
        let parts = query.map { item in
            secretNames.contains(item.name.lowercased()) ? "\(item.name)=[redacted]" : "\(item.name)=\(item.value)"
        }
        return path + "?" + parts.joined(separator: "&")
    }

    /// The same for a raw target string such as `/ws/orders/?ticket=abc&since=4`.
    public static func redactedTarget(_ raw: String) -> String {
        guard let mark = raw.firstIndex(of: "?") else { return raw }
        let query = raw[raw.index(after: mark)...].split(separator: "&").map { pair -> (name: String, value: String) in
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(kv[0]), kv.count > 1 ? String(kv[1]) : "")
        }
        return redactedTarget(path: String(raw[..<mark]), query: query)
    }
}
