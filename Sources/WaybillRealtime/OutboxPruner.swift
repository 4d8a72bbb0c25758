public import Foundation
public import WaybillObservability
public import WaybillStorage

/// Deletes relayed outbox events older than the retention (default 7 days), in the background.
/// A resume from before the pruned range is then answered with `reset`.
public final class OutboxPruner: Sendable {
    private let store: any OrderStore
    private let retention: TimeInterval
    private let interval: Duration
    private let now: @Sendable () -> Date
    private let logger: Logger

    public init(
        store: any OrderStore, retention: TimeInterval, interval: Duration, now: @escaping @Sendable () -> Date,
        logger: Logger
    ) {
        self.store = store
        self.retention = retention
        self.interval = interval
        self.now = now
        self.logger = logger
    }

    /// Prunes once now, then every `interval`, until cancelled.
    public func run() async {
        while !Task.isCancelled {
            await pruneOnce()
            try? await Task.sleep(for: interval)
        }
    }

    public func pruneOnce() async {
        let cutoff = now().addingTimeInterval(-retention)
        do {
            let removed = try await store.write { tx in try tx.pruneEvents(committedBefore: cutoff) }
            if removed > 0 { logger.info("outbox pruned", ["events": "\(removed)"]) }
        } catch {
            logger.warning("outbox prune failed", ["error": "\(error)"])
        }
    }
}
