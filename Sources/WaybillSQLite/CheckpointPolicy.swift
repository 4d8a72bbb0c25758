import Synchronization

/// When the checkpointer copies the WAL back into the database file. A value, tested without SQLite.
///
/// Why not every tick: the first commit after a checkpoint that copied everything back starts the
/// WAL over, and SQLite `fdatasync`s the new WAL header inside that commit (with
/// `synchronous=NORMAL` too). That sync (0.25 ms typical, 2 ms at p99 on the benchmark machine) is
/// paid by a request that is waiting for its answer, so a checkpoint every 250 ms put it into 4 %
/// of the writes at 100 writes/s: most of the delivery p99 (docs/BENCHMARKS.md). Checkpointing
/// only once the WAL holds `pageThreshold` pages, or after `maxAge`, makes it one write in about
/// two hundred at that rate, with the WAL bounded the way SQLite's own automatic checkpoint bounds
/// it. `maxAge` also bounds how late a checkpoint that started failing is noticed (docs/HARDENING.md).
struct CheckpointPolicy: Sendable, Equatable {
    /// WAL pages that make a checkpoint due: 4 MiB in a file the store made (1 KiB pages,
    /// `SQLiteOrderStore.newDatabasePageSize`), 16 MiB in a 4 KiB-page file from an earlier build.
    /// At 1 000 writes/s (about seven frames each) that is a checkpoint every 0.6 s; the A/B runs
    /// of the page size change included those (docs/BENCHMARKS.md, 2026-12-03 07:06).
    var pageThreshold = 4_000
    /// A WAL this process committed to is checkpointed at least this often.
    var maxAge: Duration = .seconds(2)

    /// What the checkpointer knows at one of its ticks.
    struct Tick: Sendable, Equatable {
        /// Pages in the WAL as the writer's last commit reported them; `nil` before the first
        /// commit of this process.
        var walPages: Int?
        /// Time since the last checkpoint that worked; `nil` before the first one of this process.
        /// Either `nil` makes a checkpoint due: a WAL left by an earlier process may be large.
        var sinceLastCheckpoint: Duration?
        /// Whether the last attempt failed: retried every tick, so failures are counted (and
        /// reported as unhealthy) at the tick rate, not once per `maxAge`.
        var lastAttemptFailed: Bool
        /// Whether this process committed since the last checkpoint that worked. If not, the WAL
        /// is as that checkpoint left it: checkpointing it again would find nothing new (a partial
        /// one, held back by readers, is tried again once commits grow the WAL or `maxAge` passes
        /// after the next commit).
        var committedSinceLastCheckpoint = true
    }

    func isDue(_ tick: Tick) -> Bool {
        if tick.lastAttemptFailed { return true }
        guard let pages = tick.walPages, let age = tick.sinceLastCheckpoint else { return true }
        guard tick.committedSinceLastCheckpoint, pages > 0 else { return false }
        return pages >= pageThreshold || age >= maxAge
    }
}

/// The WAL's size in pages, as the writer's last commit reported it (SQLite's WAL hook), shared
/// with the checkpointer thread.
final class WALPages: Sendable {
    /// -1: no commit reported yet.
    private let pages = Atomic<Int>(-1)
    private let commitCount = Atomic<Int>(0)

    init() {}

    /// `nil` before the first commit this process made.
    var current: Int? {
        let value = pages.load(ordering: .relaxed)
        return value < 0 ? nil : value
    }

    /// Commits reported so far (the checkpointer compares it across its checkpoints).
    var commits: Int { commitCount.load(ordering: .relaxed) }

    /// Writer thread, after each commit.
    func committed(pages count: Int) {
        pages.store(count, ordering: .relaxed)
        commitCount.add(1, ordering: .relaxed)
    }
}
