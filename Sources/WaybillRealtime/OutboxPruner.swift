public import Foundation
import WaybillDomain
public import WaybillObservability
public import WaybillStorage

/// Deletes relayed outbox events older than the retention (default 7 days), session records
/// (login attempts, logouts) past their use, and `Idempotency-Key` records older than a day, in
/// the background.
///
/// One node prunes at a time: it runs only while it holds the store's `"outbox-pruner"` lease
/// (pruning twice would be harmless, but it is wasted work on the shared store). A resume from
/// before the pruned range is answered with `reset`.
public final class OutboxPruner: Sendable {
    /// The lease's name in the store.
    public static let leaseName = "outbox-pruner"

    private let store: any OrderStore
    private let retention: Duration
    private let sessionRetention: Duration
    private let idempotencyRetention: Duration
    private let interval: Duration
    private let now: @Sendable () -> Date
    private let clock: any Clock<Duration>
    private let lease: any Lease
    private let logger: Logger

    /// - Parameters:
    ///   - retention: how long events stay replayable.
    ///   - sessionRetention: how long login attempts, logouts, unredeemed tickets and API tokens are
    ///     kept after their time (an attempt's, a logout's, an expiry); longer than the login
    ///     throttle's window (5 min) and the session watchers' overlap (seconds).
    ///   - idempotencyRetention: how long an `Idempotency-Key` record is kept after it was last
    ///     written (SPEC §2: at least 24 h; the server's default is 48 h).
    ///   - now: the wall clock the cutoffs are computed from.
    ///   - clock: what the pruner sleeps on between runs.
    public init(
        store: any OrderStore, retention: Duration, sessionRetention: Duration = .seconds(3600),
        idempotencyRetention: Duration = .seconds(2 * 86_400), interval: Duration,
        now: @escaping @Sendable () -> Date, clock: any Clock<Duration> = ContinuousClock(), logger: Logger
    ) {
        self.store = store
        self.retention = retention
        self.sessionRetention = sessionRetention
        self.idempotencyRetention = idempotencyRetention
        self.interval = interval
        self.now = now
        self.clock = clock
        self.lease = store.lease(Self.leaseName)
        self.logger = logger
    }

    /// While this node holds the lease: prunes once, then every `interval`, until cancelled.
    public func run() async {
        while !Task.isCancelled {
            guard await lease.acquire() else { break }
            while !Task.isCancelled, lease.isHeld {
                await pruneOnce()
                do { try await clock.sleep(for: interval) } catch { break }
            }
            // The lease lapsed: a lease whose confirmation ran out a moment before its holder
            // noticed may be handed straight back by `acquire`; this pause keeps that from spinning.
            guard !Task.isCancelled else { break }
            try? await clock.sleep(for: .milliseconds(250))
        }
        await lease.release()
    }

    /// Rows deleted per transaction. Measured reason: an hour of events at a few hundred writes a
    /// second (and their group rows) in one transaction outlasts PostgreSQL's 4 s statement timeout,
    /// after which every later run has more to do and never succeeds; on SQLite it holds the writer
    /// (and every write) for as long as it runs.
    public static let chunk = 2_000

    public func pruneOnce() async {
        let now = self.now(), cutoff = now.adding(.zero - retention), sessions = now.adding(.zero - sessionRetention)
        let keys = now.adding(.zero - idempotencyRetention)
        // Each kind in its own short transactions: one that fails does not keep the others from going.
        let events = await inChunks("events") { tx, limit in try tx.pruneEvents(committedBefore: cutoff, limit: limit) }
        let idempotency = await inChunks("idempotency keys") { tx, limit in
            try tx.pruneIdempotencyKeys(before: keys, limit: limit)
        }
        let records = await inChunks("session records") { tx, limit in
            try tx.pruneSessionRecords(before: sessions, limit: limit)
        }
        if events > 0 || records > 0 || idempotency > 0 {
            logger.info(
                "outbox pruned",
                ["events": "\(events)", "session_records": "\(records)", "idempotency_keys": "\(idempotency)"])
        }
    }

    /// Runs `prune` with a limit of `chunk` until a run deletes nothing (or fails); returns the total.
    private func inChunks(
        _ what: String, _ prune: @escaping @Sendable (any StoreWriter, Int) throws -> Int
    ) async -> Int {
        var total = 0
        while !Task.isCancelled {
            do {
                let limit = Self.chunk
                let deleted = try await store.write { tx in try prune(tx, limit) }
                total += deleted
                if deleted == 0 { break }
            } catch {
                logger.warning("prune failed; the rest waits for the next run", ["what": what, "error": "\(error)"])
                break
            }
        }
        return total
    }
}
