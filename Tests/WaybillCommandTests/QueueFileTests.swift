import Foundation
import Testing

@testable import waybill

/// The driver app's offline queue must be found again by a restart that spells the login or the
/// server another way (found by a review: `DRIVER1@…` kept actions no `driver1@…` start read).
struct QueueFileTests {
    @Test func oneLoginAndServerIsOneFileHoweverTheyAreSpelt() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        let first = DriverCommand.queueFile(in: dir, server: URL(string: "http://127.0.0.1:8080")!, email: "driver1@demo.example.com")
        for (server, email) in [
            ("http://localhost:8080", "DRIVER1@Demo.Example.com"), ("http://LOCALHOST:8080", "driver1@demo.example.com"),
            ("http://[::1]:8080", "Driver1@demo.example.com"), ("http://127.0.0.2:8080", "driver1@DEMO.example.com"),
        ] {
            #expect(DriverCommand.queueFile(in: dir, server: URL(string: server)!, email: email) == first, "\(server) \(email)")
        }
        #expect(DriverCommand.queueFile(in: dir, server: URL(string: "http://127.0.0.1:8081")!, email: "driver1@demo.example.com") != first)
        #expect(DriverCommand.queueFile(in: dir, server: URL(string: "http://127.0.0.1:8080")!, email: "driver2@demo.example.com") != first)
        #expect(DriverCommand.queueFile(in: dir, server: URL(string: "http://Tunnel.Example:80")!, email: "d@x")
            == DriverCommand.queueFile(in: dir, server: URL(string: "http://tunnel.example:80")!, email: "D@X"))
        // The scheme's default port spelt out or not: one server, one file (and one lock).
        #expect(DriverCommand.queueFile(in: dir, server: URL(string: "http://tunnel.example:80")!, email: "d@x")
            == DriverCommand.queueFile(in: dir, server: URL(string: "http://tunnel.example")!, email: "d@x"))
    }

    /// A queue an earlier version kept under the spelling typed is moved to the one name, not left
    /// behind, and only by the app that holds the queue's lock: naming the file moves nothing (a
    /// second app that then finds the lock taken must not move a file under the running one, found
    /// by a review).
    @Test func aQueueKeptUnderAnEarlierSpellingIsTakenOver() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: dir) }
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let legacy = dir.appendingPathComponent("actions-DRIVER1@Demo.example@127.0.0.1_8080.json")
        let kept = Data(#"{"actions":["kept"]}"#.utf8)
        try kept.write(to: legacy)
        let server = URL(string: "http://127.0.0.1:8080")!
        let url = DriverCommand.queueFile(in: dir, server: server, email: "DRIVER1@Demo.example")
        #expect(url.lastPathComponent == "actions-driver1@demo.example@localhost_8080.json")
        #expect(FileManager.default.fileExists(atPath: legacy.path) && !FileManager.default.fileExists(atPath: url.path))
        DriverCommand.adoptLegacyQueue(in: dir, server: server, email: "DRIVER1@Demo.example")
        #expect(try Data(contentsOf: url) == kept)
        #expect(!FileManager.default.fileExists(atPath: legacy.path))
        // Once the new name exists, an old one is left alone (never written over).
        try Data(#"{"actions":[]}"#.utf8).write(to: legacy)
        DriverCommand.adoptLegacyQueue(in: dir, server: server, email: "DRIVER1@Demo.example")
        #expect(try Data(contentsOf: url) == kept)
    }

    /// An https:// server is a usage error (exit 2), not "unreachable" (exit 1, retried for ever).
    @Test func anHTTPSServerIsRefusedAsAUsageError() async throws {
        await #expect(throws: Arguments.Problem.self) {
            try await DriverCommand.run(["--server", "https://localhost:8443", "--email", "d@x", "--password", "p"])
        }
    }
}
