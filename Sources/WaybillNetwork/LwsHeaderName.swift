/// Header names as lws looks them up and writes them by name: lower case, then the colon, as a
/// NUL-terminated C string.
///
/// Made once for the names every request or answer carries: a Swift string handed to C is copied
/// into a new buffer on each call, and these calls run for every request (docs/BENCHMARKS.md,
/// 2026-12-03: allocations per write). Service thread only, like every lws call.
enum LwsHeaderName {
    /// The request headers `LwsRequestReader` reads by name, and the answer headers the API sets.
    private static let made: [String: [CChar]] = Dictionary(
        uniqueKeysWithValues: (LwsRequestReader.customHeaders + [
            "content-type", "x-content-type-options", "cache-control", "content-security-policy", "etag",
            "idempotent-replayed", "retry-after", "allow", "referrer-policy",
        ]).map { ($0, Array(($0 + ":").utf8CString)) })

    /// Calls `body` with `name:` and its length in bytes (the NUL not counted).
    static func withColon<T>(_ name: String, _ body: (UnsafePointer<CChar>, Int32) -> T) -> T {
        key(name).withUnsafeBufferPointer { body($0.baseAddress!, Int32($0.count - 1)) }
    }

    /// `name:` as a NUL-terminated C string.
    static func key(_ name: String) -> [CChar] { made[name] ?? Array((name + ":").utf8CString) }
}
