/// Keeps at most one fetch per key in flight, and at most one more queued behind it.
///
/// A refresh asked for while a fetch of the same key runs is not dropped: the running fetch may have read
/// the data before the change, so one more fetch follows it, however many refreshes were asked for.
struct FetchDeduplicator<Key: Hashable & Sendable>: Sendable {
    private var inFlight: Set<Key> = []
    private var queued: Set<Key> = []

    /// Asks to fetch `key`; returns whether to start a fetch now.
    mutating func request(_ key: Key) -> Bool {
        if inFlight.contains(key) {
            queued.insert(key)
            return false
        }
        inFlight.insert(key)
        return true
    }

    /// The fetch of `key` finished; returns whether to start another one now.
    mutating func finished(_ key: Key) -> Bool {
        if queued.remove(key) != nil { return true }  // stays in flight
        inFlight.remove(key)
        return false
    }

    /// Forgets `key` entirely (the session stopped, so its fetch will never report back).
    mutating func forget(_ key: Key) {
        inFlight.remove(key)
        queued.remove(key)
    }

    /// Forgets any queued fetch of `key` (its detail was closed or deleted).
    mutating func cancelQueued(_ key: Key) { queued.remove(key) }

    /// Whether a fetch of `key` is running.
    func isFetching(_ key: Key) -> Bool { inFlight.contains(key) }
}
