import Foundation
import Synchronization
import Testing
import WaybillStorage

@testable import WaybillSQLite
import WaybillTesting

/// With automatic checkpoints off, failing WAL checkpoints mean a WAL that grows without bound:
/// the store reports it through `health` (what `/readyz` and `/metrics` read).
@Suite(.timeLimit(.minutes(1)))
struct SQLiteStoreHealthTests {
    /// Makes the checkpoints fail while on (the seam the store exposes to tests: a PASSIVE
    /// checkpoint does not fail on a busy database, and I/O errors cannot be set up here).
    final class FailSwitch: Sendable {
        let isOn = Atomic<Bool>(true)
        var checkpoint: SQLiteCheckpointer.Checkpoint {
            { [self] connection throws(SQLiteError) in
                if isOn.load(ordering: .relaxed) { throw SQLiteError(code: 10, message: "disk I/O error (test)") }
                try SQLiteCheckpointer.passive(connection)
            }
        }
    }

    @Test func failingCheckpointsMakeTheStoreUnhealthyUntilOneWorks() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let failures = FailSwitch()
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .milliseconds(10), checkpoint: failures.checkpoint)
        defer { store.close() }
        #expect(await eventually { store.health.problems == ["wal_checkpoint_failing"] })
        let counted = store.health.checkpointFailures
        #expect(counted >= SQLiteOrderStore.checkpointFailureThreshold)

        failures.isOn.store(false, ordering: .relaxed)
        #expect(await eventually { store.health.isHealthy })
        // The total stays: it is a counter (a metric), not the current state.
        #expect(store.health.checkpointFailures >= counted)
    }

    /// WAL syncs that keep failing (a power cut could then take back more and more answered writes)
    /// make the store unhealthy until one works (found by a review, 2026-12-07: they were counted,
    /// and nobody read the count).
    @Test func failingWALSyncsMakeTheStoreUnhealthyUntilOneWorks() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let failing = FailSwitch()
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .milliseconds(10),
            checkpoint: SQLiteCheckpointer.passive,
            walSync: { path in failing.isOn.load(ordering: .relaxed) ? false : SQLiteCheckpointer.syncWAL(at: path) })
        defer { store.close() }
        _ = try await store.write { tx in try tx.insertCompany(name: "Not synced") }
        #expect(await eventually { store.health.problems == ["wal_sync_failing"] })
        failing.isOn.store(false, ordering: .relaxed)
        #expect(await eventually { store.health.isHealthy })
        #expect(store.walSyncs.done >= 1)
    }

    @Test func aHealthyStoreReportsNothingAndAClosedOneNoStoppedCheckpointer() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        #expect(store.health.problems.isEmpty && store.health.checkpointFailures == 0)
        #expect(store.health.walPages != nil, "the migrations committed: the log's size is known")
        store.close()
        #expect(store.health.isHealthy)
    }
}
