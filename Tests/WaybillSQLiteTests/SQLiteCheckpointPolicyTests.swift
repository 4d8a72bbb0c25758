import Foundation
import Synchronization
import Testing
import WaybillStorage

@testable import WaybillSQLite
import WaybillTesting

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

    /// A tick that saw commits syncs the WAL, so a power cut takes back at most about one interval
    /// of answered writes, not every one since the last checkpoint (up to about 2 s); a tick without
    /// commits does not (found by a review, 2026-12-07).
    @Test func ticksThatSawCommitsSyncTheWAL() async throws {
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: 10_000, maxAge: .seconds(60))) { store in
            _ = try await store.write { tx in try tx.insertCompany(name: "Synced") }
            let ticks = store.checkpointerActivity.ticks
            #expect(await eventually { store.checkpointerActivity.ticks >= ticks + 3 })
            let synced = store.walSyncs.done
            #expect(synced >= 1)
            await expectNoCheckpointForTwentyTicks(store)
            #expect(store.walSyncs.done == synced, "no commit, no sync")
            _ = try await store.write { tx in try tx.insertCompany(name: "Again") }
            #expect(await eventually { store.walSyncs.done == synced + 1 })
            #expect(store.walSyncs.failed == 0)
        }
    }

    /// The WAL synced is the one SQLite writes: opened through a symbolic link, SQLite names the
    /// WAL after the link's target, and a sync of `<link>-wal` synced nothing (found by a review,
    /// 2026-12-07). A failed sync is counted as one.
    @Test func aDatabaseOpenedThroughASymlinkHasItsWALSynced() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-wal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = directory.appendingPathComponent("real.sqlite").path
        let link = directory.appendingPathComponent("link.sqlite").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: real)
        let store = try SQLiteOrderStore(
            path: link, readerCount: 1, checkpointInterval: .milliseconds(5),
            checkpointPolicy: CheckpointPolicy(pageThreshold: 10_000, maxAge: .seconds(60)),
            checkpoint: SQLiteCheckpointer.passive)
        defer { store.close() }
        _ = try await store.write { tx in try tx.insertCompany(name: "Through a link") }
        #expect(FileManager.default.fileExists(atPath: real + "-wal"))
        #expect(await eventually { store.walSyncs.done >= 1 })
        let ticks = store.checkpointerActivity.ticks
        #expect(await eventually { store.checkpointerActivity.ticks >= ticks + 3 })
        #expect(store.walSyncs.failed == 0)
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
    /// the WAL starts over again and again.
    ///
    /// The writes run on the writer thread itself (its executor): each one's continuation queues
    /// the next before the writer looks for work again, so the writer does not idle between
    /// commits. On a busy machine a preemption can still leave a gap in which the WAL starts over
    /// by itself, so this is the end-to-end check; the next test is the one that fails without the
    /// writer's part every time.
    @Test func steadyWritesStillStartTheWALOver() async throws {
        let threshold = 50
        try await withCheckpointingStore(CheckpointPolicy(pageThreshold: threshold, maxAge: .seconds(60))) { store in
            let executor = try #require(store.writerExecutor)
            let seen = Restarts(from: threshold)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<4 {
                    group.addTask(executorPreference: executor) {
                        // Until the WAL started over three times, or 40 000 writes in all.
                        for n in 0..<10_000 {
                            guard seen.count < 3 else { break }
                            _ = try await store.write { tx in try tx.insertCompany(name: "W\(writer)-\(n)") }
                            seen.record(store.checkpointerActivity.walPages ?? 0)
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(seen.count >= 3)
        }
    }

    /// The same, step by step. A reader's snapshot keeps a checkpoint from copying the newest
    /// frames back, and a commit lands while that checkpoint runs (held open by the test): the WAL
    /// keeps frames no checkpoint copied, which is where steady writes left it. The writer copies
    /// them back once asked, and the next commit starts the WAL over; without the writer's part that
    /// commit appends to the WAL instead, and so would every later one under steady writes.
    @Test func framesLeftByACheckpointAreCopiedBackByTheWriter() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let held = HeldCheckpoint()
        let store = try SQLiteOrderStore(
            path: database.path, readerCount: 1, checkpointInterval: .milliseconds(5),
            checkpointPolicy: CheckpointPolicy(pageThreshold: 1, maxAge: .seconds(60)), checkpoint: held.checkpoint)
        defer {
            // Released first: `close()` waits for the checkpointer thread, which may be held.
            held.release()
            store.close()
        }
        _ = try await store.write { tx in try tx.insertCompany(name: "Seen by the reader") }
        let reader = try database.openRawConnection()
        try reader.executeScript("BEGIN")
        _ = try reader.query("SELECT count(*) FROM companies") { row in row.int(0) }
        // Armed before a commit, so a checkpoint is due whatever the ticks before it did. While the
        // reader is open no commit can start the WAL over, wherever the held checkpoint falls.
        held.arm()
        _ = try await store.write { tx in try tx.insertCompany(name: "After the reader's snapshot") }
        // Polled, not waited for: a blocked test would hold one of the pool's few threads.
        #expect(await eventually(timeout: .seconds(10)) { held.hasEntered }, "the checkpointer copied what it could")
        _ = try await store.write { tx in try tx.insertCompany(name: "During the checkpoint") }
        try reader.executeScript("COMMIT")
        reader.close()
        let pagesBefore = try #require(store.checkpointerActivity.walPages)
        held.release()
        #expect(await eventually { store.checkpointerActivity.tails >= 1 })

        // The writer copies the tail after the writes of the batch it came in with (their answers
        // go out first), so the first of these two may still append; the WAL starts over at one of them.
        for n in 0..<2 { _ = try await store.write { tx in try tx.insertCompany(name: "After the checkpoint \(n)") } }
        let pagesAfter = try #require(store.checkpointerActivity.walPages)
        #expect(pagesAfter < pagesBefore, "the WAL started over (\(pagesBefore) pages, then \(pagesAfter))")
    }

    /// A checkpoint step the test holds: once armed, the next checkpoint copies the WAL back and then
    /// waits inside until `release()`; every other one does nothing, so no other checkpoint copies
    /// what the held one left behind.
    private final class HeldCheckpoint: Sendable {
        private let armed = Atomic<Bool>(false)
        private let entered = Atomic<Bool>(false)
        private let leave = DispatchSemaphore(value: 0)
        private let released = Atomic<Bool>(false)

        func arm() { armed.store(true, ordering: .releasing) }

        /// Whether the armed checkpoint has copied and is waiting for `release()`.
        var hasEntered: Bool { entered.load(ordering: .acquiring) }

        /// Lets the held checkpoint return. Idempotent.
        func release() {
            if !released.exchange(true, ordering: .acquiringAndReleasing) { leave.signal() }
        }

        var checkpoint: SQLiteCheckpointer.Checkpoint {
            { [self] connection throws(SQLiteError) in
                guard armed.exchange(false, ordering: .acquiringAndReleasing) else { return }
                try SQLiteCheckpointer.passive(connection)
                entered.store(true, ordering: .releasing)
                leave.wait()  // the checkpointer's own thread, not the pool
            }
        }
    }

    /// Counts how often the WAL's pages fell to under half of a size at or over `from`: it started
    /// over (a sample taken out of order by one of the concurrent writers is never that far off).
    private final class Restarts: Sendable {
        private let state = Mutex((last: 0, restarts: 0))
        let from: Int
        init(from: Int) { self.from = from }
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
