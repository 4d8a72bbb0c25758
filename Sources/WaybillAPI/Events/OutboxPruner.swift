import Foundation
import WaybillStorage

/// Deletes relayed outbox events older than the retention (default 7 days), in the background.
/// A resume from before the pruned range is then answered with `reset`.
final class OutboxPruner: Sendable {
    private let store: any OrderStore
    private let retention: TimeInterval
    private let interval: Duration
    private let clock: any WallClock
    private let logger: Logger

    init(store: any OrderStore, retention: TimeInterval, interval: Duration, clock: any WallClock, logger: Logger) {
        self.store = store
        self.retention = retention
        self.interval = interval
        self.clock = clock
        self.logger = logger
    }

    /// Prunes once now, then every `interval`, until cancelled.
    func run() async {
        while !Task.isCancelled {
            await pruneOnce()
            try? await Task.sleep(for: interval)
        }
    }

    func pruneOnce() async {
        let cutoff = clock.now().addingTimeInterval(-retention)
        do {
            let removed = try await store.write { tx in try tx.pruneEvents(committedBefore: cutoff) }
            if removed > 0 { logger.info("outbox pruned", ["events": "\(removed)"]) }
        } catch {
            logger.warning("outbox prune failed", ["error": "\(error)"])
        }
    }
}
