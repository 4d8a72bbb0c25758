import Foundation
import Synchronization
import Testing
import WaybillObservability
import WaybillStorage
import WaybillStoreTesting

@testable import WaybillAPI
@testable import WaybillSQLite

/// A store that answers but knows it is in trouble (failing WAL checkpoints) makes `/readyz`
/// fail with a reason, shows in `/metrics`, and is logged at error (docs/HARDENING.md, item 4).
@Suite(.timeLimit(.minutes(1)))
struct StoreHealthTests {
    /// Fails every checkpoint while on (the store's test seam; see SQLiteStoreHealthTests).
    final class FailSwitch: Sendable {
        let isOn = Atomic<Bool>(true)
        func open(_ path: String) throws -> SQLiteOrderStore {
            try SQLiteOrderStore(
                path: path, checkpointInterval: .milliseconds(10),
                checkpoint: { [self] connection throws(SQLiteError) in
                    if isOn.load(ordering: .relaxed) { throw SQLiteError(code: 10, message: "disk I/O error (test)") }
                    try SQLiteCheckpointer.passive(connection)
                })
        }
    }

    @Test func failingCheckpointsFailReadyzShowInMetricsAndClearWhenTheyWorkAgain() async throws {
        let failures = FailSwitch()
        try await TestServer.withRunning(openStore: { try failures.open($0) }) { server in
            #expect(try await server.eventually { try await server.request("GET", "/readyz").status == 503 })
            let ready = try await server.request("GET", "/readyz")
            #expect(ready.object.string("reason") == "wal_checkpoint_failing")
            let metrics = try await server.request("GET", "/metrics").text
            let line = metrics.split(separator: "\n").first { $0.hasPrefix("waybill_store_checkpoint_failures_total ") }
            let count = line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
            #expect(count >= SQLiteOrderStore.checkpointFailureThreshold)

            failures.isOn.store(false, ordering: .relaxed)
            #expect(try await server.eventually { try await server.request("GET", "/readyz").status == 200 })
        }
    }

    @Test func aStoreProblemIsLoggedAtErrorOnceAndItsEndAtInfo() async throws {
        let failures = FailSwitch(), logs = LogCapture()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-health-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try failures.open(directory.appendingPathComponent("waybill.sqlite").path)
        defer { store.close() }
        let watcher = StoreHealthWatcher(store: store, logger: Logger(sink: logs.sink), clock: ContinuousClock())

        var reported = StoreHealthWatcher.Reported()
        // Bounds, not waits: they end as soon as the condition holds (tens of ms on a quiet
        // machine; a loaded one starved the 10 ms checkpointer past 5 s once).
        let deadline = ContinuousClock.now + .seconds(20)
        while reported.isEmpty, ContinuousClock.now < deadline {
            reported = watcher.check(after: reported)
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(reported.problems == ["wal_checkpoint_failing"])
        reported = watcher.check(after: reported)  // still failing: not logged again
        let errors = logs.all.filter { $0.contains("level=error") && $0.contains("msg=\"store problem\"") }
        #expect(errors.count == 1)
        #expect(errors.first?.contains("problem=wal_checkpoint_failing") == true)

        failures.isOn.store(false, ordering: .relaxed)
        let over = ContinuousClock.now + .seconds(20)
        while !reported.isEmpty, ContinuousClock.now < over {
            reported = watcher.check(after: reported)
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(reported.isEmpty)
        #expect(logs.all.contains { $0.contains("level=info") && $0.contains("store problem over") })
    }

    /// A warning (the PostgreSQL store's kept reader without a connection) is logged at warning
    /// once while it lasts, and its end at info; `/readyz` does not look at warnings.
    @Test func aStoreWarningIsLoggedAtWarningOnceAndItsEndAtInfo() async throws {
        let logs = LogCapture()
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-health-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let base = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { base.close() }
        let store = HeldStore(base)
        let watcher = StoreHealthWatcher(store: store, logger: Logger(sink: logs.sink), clock: ContinuousClock())
        func warnings() -> [String] {
            logs.all.filter { $0.contains("level=warning") && $0.contains("msg=\"store warning\"") }
        }

        var reported = watcher.check(after: .init())
        #expect(reported.isEmpty)
        store.setWarnings(["postgres_urgent_reader_unconnected"])
        reported = watcher.check(after: reported)
        reported = watcher.check(after: reported)  // still there: not logged again
        #expect(reported.warnings == ["postgres_urgent_reader_unconnected"])
        #expect(reported.problems.isEmpty)
        #expect(warnings().count == 1)
        #expect(warnings().first?.contains("warning=postgres_urgent_reader_unconnected") == true)
        #expect(!logs.all.contains { $0.contains("level=error") })

        store.setWarnings([])
        reported = watcher.check(after: reported)
        #expect(reported.isEmpty)
        #expect(logs.all.contains { $0.contains("level=info") && $0.contains("store warning over") })
        #expect(warnings().count == 1)
    }
}
