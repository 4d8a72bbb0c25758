import Synchronization

/// One holder per key at a time; the others wait in arrival order, each at most until its own
/// deadline. For a store with several writer connections: at most one write per order runs at a
/// time (`OrderStore.write(changing:in:appendingEvents:)`), the rest wait here, holding no connection.
///
/// Why: writes to one order serialize on its row lock anyway, but a write waiting for that lock
/// holds a writer connection. When the lock is held for long (a transaction of a node cut off from
/// the database, which PostgreSQL ends only when it finds the peer gone, about 10 s), a few writes
/// to that one order took every writer of a node, and every write of the node waited (measured:
/// `scripts/bench.sh cluster paced 1000 20 node2-cut`, docs/BENCHMARKS.md). For the store modules
/// only (`package`).
package final class KeyedGate<Key: Hashable & Sendable>: Sendable {
    private struct Waiter {
        let id: UInt64
        let continuation: CheckedContinuation<Void, any Error>
    }
    private struct State {
        var nextID: UInt64 = 0
        /// A key is held while it is here; its waiters in arrival order.
        var held: [Key: [Waiter]] = [:]
        /// Each waiter's deadline timer, cancelled when it gets its turn.
        var timers: [UInt64: Task<Void, Never>] = [:]
    }
    private let state = Mutex(State())

    package init() {}

    /// Returns once the caller holds `key` (it must `leave` it then); throws `timedOut()` if
    /// `deadline` passes first, holding nothing.
    package func enter(
        _ key: Key, until deadline: ContinuousClock.Instant, timedOut: @escaping @Sendable () -> any Error
    ) async throws {
        // The usual case, a key nobody holds, suspends nothing.
        if tryEnter(key) { return }
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let id = state.withLock { state -> UInt64? in
                guard state.held[key] != nil else {  // left meanwhile
                    state.held[key] = []
                    return nil
                }
                state.nextID &+= 1
                state.held[key]!.append(Waiter(id: state.nextID, continuation: continuation))
                return state.nextID
            }
            guard let id else { return continuation.resume() }
            let timer = Task { [self] in
                do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return }  // its turn came
                expire(key, id, error: timedOut())
            }
            // Kept unless the waiter is already gone (its turn came first): then no one would cancel it.
            let late = state.withLock { state -> Bool in
                guard state.held[key]?.contains(where: { $0.id == id }) == true else { return true }
                state.timers[id] = timer
                return false
            }
            if late { timer.cancel() }
        }
    }

    /// Takes `key` if nobody holds it (the caller must `leave` it then); never waits.
    package func tryEnter(_ key: Key) -> Bool {
        state.withLock { state in
            guard state.held[key] == nil else { return false }
            state.held[key] = []
            return true
        }
    }

    /// Takes every key of `keys`, holding none while it waits: when one is busy, it leaves those it
    /// took, waits for that one's turn (`enter`), then tries the others again without waiting. So
    /// a caller of several keys never holds up a key's other callers while it waits for another
    /// (a receipts write of orders A and K, K's turn held by a write waiting on a locked row, would
    /// otherwise hold up every write of A), and two such callers cannot wait for each other.
    /// Returns holding each distinct key once (each must be `leave`d once), or throws holding none.
    /// Each round that finds a key busy gives up its place in that key's queue; the deadline ends
    /// the rounds.
    package func enterAll(
        _ keys: [Key], until deadline: ContinuousClock.Instant, timedOut: @escaping @Sendable () -> any Error
    ) async throws {
        var distinct: [Key] = []
        for key in keys where !distinct.contains(key) { distinct.append(key) }
        var waitFor: Key?
        while true {
            guard ContinuousClock.now < deadline else { throw timedOut() }
            var held: [Key] = []
            if let key = waitFor {
                try await enter(key, until: deadline, timedOut: timedOut)
                held.append(key)
            }
            var busy: Key?
            for key in distinct where key != waitFor {
                guard tryEnter(key) else {
                    busy = key
                    break
                }
                held.append(key)
            }
            guard let busy else { return }
            for key in held { leave(key) }
            waitFor = busy
        }
    }

    /// Hands `key` to its first waiter, or frees it.
    package func leave(_ key: Key) {
        let next = state.withLock { state -> (Waiter, Task<Void, Never>?)? in
            guard let nobodyWaits = state.held[key]?.isEmpty else { return nil }
            guard !nobodyWaits else {
                state.held[key] = nil
                return nil
            }
            let first = state.held[key]!.removeFirst()  // the key stays held: by `first` now
            return (first, state.timers.removeValue(forKey: first.id))
        }
        guard let (waiter, timer) = next else { return }
        timer?.cancel()
        waiter.continuation.resume()
    }

    /// A waiter whose deadline came while it still waited gives up its place.
    private func expire(_ key: Key, _ id: UInt64, error: any Error) {
        let expired = state.withLock { state -> Waiter? in
            state.timers[id] = nil
            guard let index = state.held[key]?.firstIndex(where: { $0.id == id }) else { return nil }
            return state.held[key]!.remove(at: index)
        }
        expired?.continuation.resume(throwing: error)
    }

    /// Keys held now (tests: nothing stays held).
    package var heldKeys: Int { state.withLock { $0.held.count } }

    /// Whether someone holds `key` now (tests).
    package func isHeld(_ key: Key) -> Bool { state.withLock { $0.held[key] != nil } }

    /// Callers waiting for `key` now (tests).
    package func waiting(for key: Key) -> Int { state.withLock { $0.held[key]?.count ?? 0 } }
}
