import Synchronization
public import WaybillStorage

/// Passes every call through to `store`, and holds reads, or writes, while a test says so: a slow
/// replay query, a touch still in flight. Counts writes, and adds the warnings a test sets to the
/// store's health. One wrapper for the tests of the hub, the feed, the authenticator and the
/// health watcher (each had its own copy).
public final class HeldStore: OrderStore {
    private struct Gate {
        var holding = false
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let store: any OrderStore
    private let reads = Mutex(Gate()), writeGate = Mutex(Gate()), writeCount = Atomic<Int>(0)
    private let addedWarnings = Mutex<[String]>([])

    public init(_ store: any OrderStore) { self.store = store }

    /// Reads wait from now on, until `releaseReads`.
    public func holdReads() { reads.withLock { $0.holding = true } }
    /// Lets the held reads (and every later one) go on.
    public func releaseReads() { Self.release(reads) }
    /// Writes wait from now on, until `releaseWrites` (they are counted as they arrive).
    public func holdWrites() { writeGate.withLock { $0.holding = true } }
    public func releaseWrites() { Self.release(writeGate) }
    /// Reads waiting now.
    public var heldReads: Int { reads.withLock { $0.waiting.count } }
    /// Writes asked for so far, held or not.
    public var writes: Int { writeCount.load(ordering: .relaxed) }

    private static func release(_ gate: borrowing Mutex<Gate>) {
        let waiting = gate.withLock { gate in
            gate.holding = false
            defer { gate.waiting = [] }
            return gate.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    private static func pass(_ gate: borrowing Mutex<Gate>) async {
        await withCheckedContinuation { continuation in
            let held = gate.withLock { gate -> Bool in
                guard gate.holding else { return false }
                gate.waiting.append(continuation)
                return true
            }
            if !held { continuation.resume() }
        }
    }

    public func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        await Self.pass(reads)
        return try await store.read(body)
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        writeCount.add(1, ordering: .relaxed)
        await Self.pass(writeGate)
        return try await store.write(body)
    }

    /// The store's health, with `warnings` set by the test after its own.
    public var health: StoreHealth {
        var health = store.health
        health.warnings += addedWarnings.withLock { $0 }
        return health
    }

    /// Warnings `health` shows from now on, after the store's own.
    public func setWarnings(_ warnings: [String]) { addedWarnings.withLock { $0 = warnings } }

    public func close() {}
    public func lease(_ name: String) -> any Lease { store.lease(name) }
}
