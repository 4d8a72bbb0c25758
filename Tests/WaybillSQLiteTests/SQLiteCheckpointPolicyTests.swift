import Foundation
import Synchronization
import Testing
import WaybillStorage

@testable import WaybillSQLite

/// The checkpointer copies the WAL back only when it is big or old (`CheckpointPolicy`): each full
/// checkpoint makes the next commit `fdatasync` a new WAL header inside a request.
@Suite(.timeLimit(.minutes(1)))
struct SQLiteCheckpointPolicyTests {
    private let policy = CheckpointPolicy(pageThreshold: 100, maxAge: .seconds(10))

    @Test func aSmallYoungWALWaits() {
        #expect(!policy.isDue(.init(walPages: 99, sinceLastCheckpoint: .seconds(9), lastAttemptFailed: false)))
        #expect(!policy.isDue(.init(walPages: 0, sinceLastCheckpoint: .seconds(60), lastAttemptFailed: false)))
    }

    @Test func aBigWALIsDue() {
        #expect(policy.isDue(.init(walPages: 100, sinceLastCheckpoint: .zero, lastAttemptFailed: false)))
    }

    @Test func anOldNonEmptyWALIsDue() {
        #expect(policy.isDue(.init(walPages: 1, sinceLastCheckpoint: .seconds(10), lastAttemptFailed: false)))
    }

    /// A WAL left by an earlier process may be large; nothing this process did says otherwise.
    @Test func anUnknownWALIsDue() {
        #expect(policy.isDue(.init(walPages: nil, sinceLastCheckpoint: .zero, lastAttemptFailed: false)))
        #expect(policy.isDue(.init(walPages: 3, sinceLastCheckpoint: nil, lastAttemptFailed: false)))
    }

    /// Failures are retried every tick, so health sees them at the tick rate.
    @Test func aFailedAttemptIsRetriedAtOnce() {
        #expect(policy.isDue(.init(walPages: 0, sinceLastCheckpoint: .zero, lastAttemptFailed: true)))
    }

    /// Nothing committed since the last checkpoint: the WAL is as it left it, whatever its size.
    @Test func aWALNothingWasCommittedToSinceTheLastCheckpointWaits() {
        #expect(!policy.isDue(.init(
            walPages: 500, sinceLastCheckpoint: .seconds(60), lastAttemptFailed: false, committedSinceLastCheckpoint: false)))
        #expect(policy.isDue(.init(
            walPages: 500, sinceLastCheckpoint: .seconds(60), lastAttemptFailed: true, committedSinceLastCheckpoint: false)))
    }

    @Test func walPagesFollowCommits() {
        let pages = WALPages()
        #expect(pages.current == nil && pages.commits == 0)
        pages.committed(pages: 7)
        pages.committed(pages: 9)
        #expect(pages.current == 9 && pages.commits == 2)
    }

    /// With the real store: small writes leave the WAL alone (no checkpoint per tick), and the
    /// writer reports the WAL's size after each commit.
    /// A store whose checkpointer ticks every 5 ms under `policy`, after its first checkpoint (the
    /// first tick checkpoints whatever the migrations, or an earlier process, left).
    private func withCheckpointingStore(
        _ policy: CheckpointPolicy, _ body: (SQLiteOrderStore) async throws -> Void
    ) async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .milliseconds(5),
            checkpointPolicy: policy, checkpoint: SQLiteCheckpointer.passive)
        defer { store.close() }
        #expect(await eventually { store.checkpointerActivity.attempts >= 1 })
        try await body(store)
    }

    /// Twenty more ticks pass without a checkpoint.
    private func expectNoCheckpointForTwentyTicks(_ store: SQLiteOrderStore) async {
        let before = store.checkpointerActivity
        #expect(await eventually { store.checkpointerActivity.ticks >= before.ticks + 20 })
        #expect(store.checkpointerActivity.attempts == before.attempts)
    }

    @Test func smallWritesDoNotCheckpointEveryTick() async throws {
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: 10_000, maxAge: .seconds(60))) { store in
            for n in 0..<5 { _ = try await store.write { tx in try tx.insertCompany(name: "C\(n)") } }
            #expect((store.checkpointerActivity.walPages ?? 0) > 0)
            await expectNoCheckpointForTwentyTicks(store)
        }
    }

    @Test func aWALOverTheThresholdIsCheckpointedOnce() async throws {
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: 1, maxAge: .seconds(60))) { store in
            // Read before the write: its checkpoint may come within a tick of the commit.
            let before = store.checkpointerActivity.attempts
            _ = try await store.write { tx in try tx.insertCompany(name: "Big enough") }
            #expect(await eventually { store.checkpointerActivity.attempts > before })
            // Nothing committed since: the next ticks leave it alone.
            await expectNoCheckpointForTwentyTicks(store)
        }
    }

    /// Under steady writes, commits land while every checkpoint copies and syncs, so no checkpoint
    /// alone ends with the whole WAL copied back and the WAL would never start over (it grew by
    /// every commit's pages for as long as the writes went on). The writer copies that tail, and
    /// the WAL starts over again and again while eight writes are always in flight.
    @Test func steadyWritesStillStartTheWALOver() async throws {
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: 50, maxAge: .seconds(60))) { store in
            // Pages after the last write seen, and how often they fell to under half: the WAL started
            // over (a sample taken out of order by one of the concurrent writers is never that far off).
            let seen = Restarts()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        // Until the WAL started over three times, or 40 000 writes in all.
                        for n in 0..<5_000 where seen.count < 3 {
                            _ = try await store.write { tx in try tx.insertCompany(name: "W\(writer)-\(n)") }
                            let pages = store.checkpointerActivity.walPages ?? 0
                            seen.record(pages)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(store.checkpointerActivity.tails >= 1)
            #expect(seen.count >= 3)
        }
    }

    /// Counts how often the WAL's pages fell to under half of a size at or over `from`.
    private final class Restarts: Sendable {
        private let state = Mutex((last: 0, restarts: 0))
        let from = 50
        func record(_ pages: Int) {
            state.withLock { state in
                if state.last >= from && pages < state.last / 2 { state.restarts += 1 }
                state.last = pages
            }
        }
        var count: Int { state.withLock { $0.restarts } }
    }

    @Test func anOldWALIsCheckpointed() async throws {
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: 10_000, maxAge: .milliseconds(50))) { store in
            let before = store.checkpointerActivity.attempts
            _ = try await store.write { tx in try tx.insertCompany(name: "Old enough") }
            #expect(await eventually { store.checkpointerActivity.attempts > before })
        }
    }
}
