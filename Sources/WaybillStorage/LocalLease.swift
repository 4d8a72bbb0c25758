import Synchronization

/// A lease for stores that serve one process: a lock shared by the leases of one name.
///
/// `SQLiteOrderStore` hands these out. Within the process the semantics match the cluster-wide
/// kind: one holder at a time, `acquire` waits (polling every `retry`) until it is free.
public final class LocalLease: Lease {
    /// Which names are taken, shared by every lease a store hands out.
    public final class Registry: Sendable {
        let taken = Mutex<Set<String>>([])
        public init() {}
    }

    private let name: String
    private let registry: Registry
    private let held = Atomic<Bool>(false)
    private let retry: Duration

    public init(name: String, registry: Registry, retry: Duration = .milliseconds(100)) {
        self.name = name
        self.registry = registry
        self.retry = retry
    }

    deinit {
        if held.load(ordering: .acquiring) { _ = registry.taken.withLock { $0.remove(name) } }
    }

    public func acquire() async -> Bool {
        while !Task.isCancelled {
            if held.load(ordering: .acquiring) { return true }
            if registry.taken.withLock({ $0.insert(name).inserted }) {
                held.store(true, ordering: .releasing)
                return true
            }
            try? await Task.sleep(for: retry)
        }
        return false
    }

    public var isHeld: Bool { held.load(ordering: .acquiring) }

    public func release() async {
        guard held.exchange(false, ordering: .acquiringAndReleasing) else { return }
        _ = registry.taken.withLock { $0.remove(name) }
    }
}
