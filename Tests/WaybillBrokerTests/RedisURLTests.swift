import Testing
import WaybillBroker

@testable import WaybillRedis

struct RedisURLTests {
    @Test func parsesHostPortAndDatabase() throws {
        let full = try RedisURL(parsing: "redis://10.0.0.5:6380/2")
        #expect(full == RedisURL(host: "10.0.0.5", port: 6380, database: 2))
        #expect(
            try RedisURL(parsing: "redis://cache.internal") == RedisURL(host: "cache.internal", port: 6379, database: 0)
        )
        #expect(
            try RedisURL(parsing: "REDIS://localhost:7000/") == RedisURL(host: "localhost", port: 7000, database: 0))
        #expect(try RedisURL(parsing: "redis://[::1]:6390/1") == RedisURL(host: "::1", port: 6390, database: 1))
        #expect(full.description == "redis://10.0.0.5:6380/2")
    }

    @Test(arguments: [
        ("http://x:1", "expected redis://host[:port][/db]"), ("", "expected redis://host[:port][/db]"),
        ("rediss://x:1", "TLS is not supported (hiredis 0.14)"), ("redis://", "missing host"),
        ("redis://:6379", "missing host"),
        ("redis://x:0", "bad port"), ("redis://x:65536", "bad port"), ("redis://x:abc", "bad port"),
        ("redis://x:1/db", "bad database number"), ("redis://x:1/-1", "bad database number"),
        ("redis://x y:1", "bad host"),
        ("redis://x:1?timeout=3", "query parameters are not supported"), ("redis://[::1:1", "unclosed [ in host"),
    ])
    func rejectsBadURLsWithAReason(text: String, reason: String) {
        // A query is shown as `?…` (it may hold a password).
        let shown = text.split(separator: "?", maxSplits: 1).first.map { text.contains("?") ? "\($0)?…" : String($0) } ?? text
        #expect(throws: BrokerError("invalid Redis URL \"\(shown)\": \(reason)")) { try RedisURL(parsing: text) }
    }

    /// A password in the URL is refused without being repeated: the error goes to stderr and from
    /// there into the service's log (found by a review, 2026-12-03).
    @Test(arguments: [
        "redis://user:secret@x:1", "redis://:secret@x:1/2", "rediss://u:secret@x:1", "redis://:se/cret@x:1",
        "redis://:secret\(String(repeating: "s", count: 300))@x:1",
    ])
    func credentialsAreRefusedWithoutRepeatingThem(text: String) {
        guard let message = Self.refusal(of: text) else { return }
        #expect(!message.contains("secret"), "\(message)")
        #expect(message.contains("…@x:1"), "\(message)")
    }

    /// The message `text` is refused with (`nil`, recorded as an issue, if it is accepted).
    static func refusal(of text: String) -> String? {
        do {
            _ = try RedisURL(parsing: text)
            Issue.record("accepted \(text)")
            return nil
        } catch {
            return error.message
        }
    }

    /// Nor a password in a query (`?password=`, which other Redis clients take) or a fragment, even
    /// one holding an `@`.
    @Test(arguments: [
        "redis://x:1/0?password=secret", "rediss://x:1?user=u&password=secret", "redis://x:1#secret",
        "redis://x:1/0?password=ab@secret", "redis://admin:s3cr#secret@host:1", "redis://u:a?secret@host:1",
    ])
    func aQueryOrFragmentIsNotRepeated(text: String) {
        guard let message = Self.refusal(of: text) else { return }
        #expect(!message.contains("secret"), "\(message)")
    }

    /// What the CLI shows for a typo: the public initializer throws the same one-line error.
    @Test func brokerInitRejectsABadURL() {
        #expect(throws: BrokerError("invalid Redis URL \"redis//localhost\": expected redis://host[:port][/db]")) {
            try RedisBroker(url: "redis//localhost")
        }
        #expect(throws: BrokerError("invalid Redis channel: must be 1 to 1024 bytes")) {
            try RedisBroker(url: "redis://localhost", channel: "")
        }
    }
}
