import Synchronization

/// Counts work running at once and refuses more than `limit`: the hub's bound on authentication
/// tasks and replay queries. Refusing at once (rather than queueing) keeps memory bounded and
/// tells the client to come back later, which it does with backoff.
final class ConcurrencyGate: Sendable {
    let limit: Int
    private let running = Mutex(0)

    init(limit: Int) { self.limit = max(1, limit) }

    /// Takes a place if one is free; every `true` must be matched by one `leave()`.
    func tryEnter() -> Bool {
        running.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func leave() { running.withLock { $0 -= 1 } }

    /// Places taken now.
    var count: Int { running.withLock { $0 } }
}
