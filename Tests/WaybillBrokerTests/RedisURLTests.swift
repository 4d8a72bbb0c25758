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
        ("redis://user:secret@x:1", "credentials are not supported"), ("redis://x y:1", "bad host"),
        ("redis://x:1?timeout=3", "query parameters are not supported"), ("redis://[::1:1", "unclosed [ in host"),
    ])
    func rejectsBadURLsWithAReason(text: String, reason: String) {
        #expect(throws: BrokerError("invalid Redis URL \"\(text)\": \(reason)")) { try RedisURL(parsing: text) }
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
