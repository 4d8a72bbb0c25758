import WaybillObservability
import WaybillStorage

/// Logs the store's problems (`OrderStore.health`) at error when they appear, its warnings at
/// warning, and each at info when it is gone: a failing WAL checkpoint must reach the log even if
/// nobody probes `/readyz`.
struct StoreHealthWatcher: Sendable {
    let store: any OrderStore
    let logger: Logger
    let clock: any Clock<Duration>
    var interval: Duration = .seconds(5)

    /// What was logged as lasting at the last check.
    struct Reported: Equatable {
        var problems: [String] = []
        var warnings: [String] = []
        var isEmpty: Bool { problems.isEmpty && warnings.isEmpty }
    }

    /// Checks every `interval` until cancelled.
    func run() async {
        var reported = Reported()
        while !Task.isCancelled {
            reported = check(after: reported)
            do { try await clock.sleep(for: interval) } catch { return }
        }
    }

    /// Logs what changed since `reported` (each problem or warning once while it lasts); returns
    /// what lasts now.
    func check(after reported: Reported) -> Reported {
        let health = store.health
        Self.changes(from: reported.problems, to: health.problems) { problem in
            logger.error("store problem", ["problem": problem, "checkpoint_failures": "\(health.checkpointFailures)"])
        } ended: { problem in
            logger.info("store problem over", ["problem": problem])
        }
        Self.changes(from: reported.warnings, to: health.warnings) { warning in
            logger.warning("store warning", ["warning": warning])
        } ended: { warning in
            logger.info("store warning over", ["warning": warning])
        }
        return Reported(problems: health.problems, warnings: health.warnings)
    }

    /// Calls `appeared` for each name in `now` not in `before`, and `ended` for each the other way.
    private static func changes(
        from before: [String], to now: [String], appeared: (String) -> Void, ended: (String) -> Void
    ) {
        for name in now where !before.contains(name) { appeared(name) }
        for name in before where !now.contains(name) { ended(name) }
    }
}
