import Foundation
import Testing
import WaybillAPI
import WaybillNetwork

/// `--token-days` and `--metrics-token` on the real executable (hardening item 6).
@Suite(.timeLimit(.minutes(1)))
struct SecurityFlagsTests {
    @Test func helpDocumentsTheSecurityFlags() async throws {
        let help = try ChildProcess(["serve", "--help"])
        #expect(await help.exitStatus() == 0)
        let text = help.stdout.joined(separator: "\n")
        for needle in [
            "--token-days N", "WAYBILL_TOKEN_DAYS", "default 30", "--token-idle-hours N", "WAYBILL_TOKEN_IDLE_HOURS",
            "default 12", "--metrics-token TOKEN", "WAYBILL_METRICS_TOKEN",
        ] {
            #expect(text.contains(needle), "serve --help lacks \(needle)")
        }
    }

    @Test(arguments: [
        ["--token-days", "0"], ["--token-days", "x"], ["--token-idle-hours", "-1"], ["--token-idle-hours", "8761"],
        ["--metrics-token", "short"], ["--inline-writes", "maybe"],
    ])
    func badValuesAreAClearError(_ flag: [String]) async throws {
        let serve = try ChildProcess(["serve", "--port", "0", "--data-dir", "/nonexistent/never-created"] + flag)
        defer { serve.terminate() }
        #expect(await serve.exitStatus() == 2)
        #expect(serve.stderr.contains { $0.contains(flag[0]) })
    }

    @Test func helpDocumentsTheInlineWritesFlag() async throws {
        let help = try ChildProcess(["serve", "--help"])
        #expect(await help.exitStatus() == 0)
        let text = help.stdout.joined(separator: "\n")
        #expect(text.contains("--inline-writes on|off") && text.contains("WAYBILL_INLINE_WRITES"))
    }

    @Test func theMetricsTokenFlagGuardsMetrics() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-flags-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let token = "flag-metrics-token-42424242"
        let server = try ChildProcess(["serve", "--port", "0", "--data-dir", directory.path, "--metrics-token", token])
        defer { server.terminate() }
        let port = try #require(await ExecutableTests.port(of: server))
        let url = try #require(URL(string: "http://127.0.0.1:\(port)/metrics"))
        let open = try await HTTPClient.send(method: "GET", url: url, headers: [], body: nil, timeout: .seconds(10))
        #expect(open.status == 401)
        let allowed = try await HTTPClient.send(
            method: "GET", url: url, headers: [("Authorization", "Bearer \(token)")], body: nil, timeout: .seconds(10))
        #expect(allowed.status == 200)
        #expect(String(decoding: allowed.body, as: UTF8.self).contains("waybill_"))
    }
}
