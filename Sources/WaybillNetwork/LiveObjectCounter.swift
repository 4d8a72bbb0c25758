import Synchronization

/// Counts the per-request and per-socket Swift objects alive now, so leak tests can compare
/// `HTTPServer.liveSessionObjects` before and after a workload.
final class LiveObjectCounter: Sendable {
    private let live = Atomic<Int>(0)
    var value: Int { live.load(ordering: .relaxed) }
    func increment() { live.add(1, ordering: .relaxed) }
    func decrement() { live.subtract(1, ordering: .relaxed) }
}
