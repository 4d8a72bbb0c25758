import WaybillObservability
import WaybillStorage

/// Logs the store's problems (`OrderStore.health`) at error when they appear, and at info when they
/// are gone: a failing WAL checkpoint must reach the log even if nobody probes `/readyz`.
struct StoreHealthWatcher: Sendable {
    let store: any OrderStore
    let logger: Logger
    let clock: any Clock<Duration>
    var interval: Duration = .seconds(5)

    /// Checks every `interval` until cancelled.
    func run() async {
        var reported: [String] = []
        while !Task.isCancelled {
            reported = check(after: reported)
            do { try await clock.sleep(for: interval) } catch { return }
        }
    }

    /// Logs what changed since `reported` (each problem once while it lasts); returns the problems now.
    func check(after reported: [String]) -> [String] {
        let health = store.health
        for problem in health.problems where !reported.contains(problem) {
            logger.error("store problem", ["problem": problem, "checkpoint_failures": "\(health.checkpointFailures)"])
        }
        for problem in reported where !health.problems.contains(problem) {
            logger.info("store problem over", ["problem": problem])
        }
        return health.problems
    }
}
