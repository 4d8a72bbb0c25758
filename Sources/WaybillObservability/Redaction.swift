/// Removes secrets and free text from request targets before they are logged.
public enum Redaction {
    /// Query arguments whose values are credentials.
    static let secretNames: Set<String> = ["token", "ticket", "access_token", "password"]
    /// Query arguments whose values are what a user typed (a search: numbers and titles, which may
    /// name customers): only their length is logged. The panel searches as the user types, so every
    /// prefix of a search would otherwise be in the access log.
    static let textNames: Set<String> = ["q"]

    /// `path?query` with the values of `token`, `ticket` (and similar) replaced by `[redacted]`, and
    /// those of `q` by their length in characters.
    public static func redactedTarget(path: String, query: [(name: String, value: String)]) -> String {
        guard !query.isEmpty else { return path }
        let parts = query.map { item in
            let name = item.name.lowercased()
            if secretNames.contains(name) { return "\(item.name)=[redacted]" }
            if textNames.contains(name) { return "\(item.name)=[\(item.value.count) chars]" }
            return "\(item.name)=\(item.value)"
        }
        return path + "?" + parts.joined(separator: "&")
    }
}
