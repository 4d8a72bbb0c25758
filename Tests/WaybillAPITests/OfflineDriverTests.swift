import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// SPEC §5 rule 8 end to end: `waybill driver` queues actions while the server is down and, once it is
/// back on the same data, each is applied exactly once, in order, with one event each.
@Suite(.timeLimit(.minutes(2)))
struct OfflineDriverTests {
    @Test func actionsTypedWhileTheServerIsDownAreAppliedOnceInOrderWhenItIsBack() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let before = try await server.request("GET", "/api/orders/\(id)/", token: driver.token)
            let version = try #require(before.object.int("version"))
            let stages = try #require(before.object["stages"] as? [[String: Any]])
            let stage = try #require(stages.first?.int("id"))
            let stateDir = server.directory.appendingPathComponent("driver-state")
            let app = try ChildProcess([
                "driver", "--server", server.baseURL, "--email", driver.email, "--password", driver.password, "--json",
                "--state-dir", stateDir.path,
            ])
            defer { app.terminate() }
            let live = try #require(
                await app.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" })

            let newest = try await server.store.read { tx in try tx.newestEventID() }
            await server.stopServer()
            let down = try #require(
                await app.line(after: live.index) {
                    $0["kind"] as? String == "connection" && $0["state"] as? String != "live"
                })
            app.type(#"{"action":"teleport","order":\#(id)}"#)
            let complaint = await app.line(after: down.index) {
                $0["kind"] as? String == "error" && ($0["message"] as? String)?.contains("teleport") == true
            }
            #expect(complaint != nil, "a bad command says so")
            app.type(#"{"action":"status","order":\#(id),"status":"accepted"}"#)
            app.type("stage \(id) \(stage)")
            let queued = try #require(
                await app.line(after: down.index) { $0["kind"] as? String == "action" && $0["waiting"] as? Int == 2 })
            #expect(queued.object["state"] as? String == "waiting")
            // The queue is on disk before anything reached the server.
            let files = try FileManager.default.contentsOfDirectory(atPath: stateDir.path)
                .filter { $0.hasPrefix("actions-") && $0.hasSuffix(".json") }  // not an atomic write's temporary file
            #expect(files.count == 1, "\(files)")
            let stored = try files.first.map { try Data(contentsOf: stateDir.appendingPathComponent($0)) }
            let queue = stored.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
            #expect((queue?["actions"] as? [Any])?.count == 2)

            try await server.startServer()
            let accepted = try #require(
                await app.line(after: queued.index, timeout: .seconds(60)) {
                    $0["kind"] as? String == "action" && $0["state"] as? String == "applied"
                        && $0["action"] as? String == "status"
                })
            let staged = try #require(
                await app.line(after: queued.index, timeout: .seconds(60)) {
                    $0["kind"] as? String == "action" && $0["state"] as? String == "applied"
                        && $0["action"] as? String == "complete_stage"
                })
            #expect(accepted.index < staged.index, "sent in the order typed")
            #expect(staged.object["waiting"] as? Int == 0)
            let refused = app.stdout.filter { $0.contains(#""state":"refused""#) }
            #expect(refused.isEmpty, "\(refused)")

            let after = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(after.object.string("status") == "accepted")
            #expect(after.object.int("version") == version + 2, "each action applied exactly once")
            let done = (after.object["stages"] as? [[String: Any]])?.first { $0.int("id") == stage }
            #expect(done?["completed_at"] is String)
            let events = try await server.store.read { tx in try tx.events(after: newest, limit: 10_000) }
                // The app's receipts (order_seen) are not actions: only the writes count here.
                .filter { $0.event.orderID == OrderID(id) && $0.event.type != .seen }.map(\.event.type)
            #expect(events == [.statusChanged, .updated], "one event per action, in order")
        }
    }

    /// A refused action is reported once: the next start of the app does not report it again (the
    /// session kept refusals until dismissed, and the app never dismissed them, so every start
    /// printed the same old refusals as if new; found by a review).
    @Test func aRefusalIsReportedOnceAcrossRestarts() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let stateDir = server.directory.appendingPathComponent("driver-state")
            let arguments = [
                "driver", "--server", server.baseURL, "--email", driver.email, "--password", driver.password, "--json",
                "--state-dir", stateDir.path,
            ]
            let first = try ChildProcess(arguments)
            _ = try #require(await first.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" })
            _ = try await server.request(
                "POST", "/api/orders/\(id)/status", token: seed.dispatcherToken, json: ["status": "cancelled"])
            first.type(#"{"action":"status","order":\#(id),"status":"accepted"}"#)
            let refused = await first.line(timeout: .seconds(30)) { $0["kind"] as? String == "action" && $0["state"] as? String == "refused" }
            #expect(refused != nil, "the cancelled order's accept is refused")
            first.type("quit")
            #expect(await first.exitStatus(timeout: .seconds(20)) == 0)

            let second = try ChildProcess(arguments)
            defer { second.terminate() }
            let live = await second.line { $0["kind"] as? String == "connection" && $0["state"] as? String == "live" }
            #expect(live != nil)
            _ = await second.line { $0["kind"] as? String == "list" }
            try await Task.sleep(for: .milliseconds(500))
            // Everything it printed, up to its exit: a late second report is counted too.
            second.type("quit")
            #expect(await second.exitStatus(timeout: .seconds(20)) == 0)
            let again = second.stdout.filter { $0.contains(#""state":"refused""#) }
            #expect(again.isEmpty, "\(again)")
        }
    }
}
