import Synchronization
import WaybillDomain
import WaybillObservability
import WaybillStorage

/// A store that counts its transactions in `Metrics` (`waybill_store_transactions_total`), and
/// notices when its writes keep failing while reads work (`store_writes_failing` in `health`).
///
/// The server wraps its store in one at start, so everything it runs (requests, socket
/// authentication, replays, the relay, the feed) is counted at one place, the same for every
/// backend. Counted when the transaction is asked for, whether or not it succeeds.
struct MeteredOrderStore: OrderStore {
    let base: any OrderStore
    let metrics: Metrics
    let writes = WriteOutcomes()

    init(_ base: any OrderStore, metrics: Metrics) {
        self.base = base
        self.metrics = metrics
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        metrics.storeTransaction(write: false)
        return try await base.read(body)
    }

    func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        metrics.storeTransaction(write: false)
        return try await base.urgentRead(body)
    }

    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        metrics.storeTransaction(write: true)
        return try await writes.noting { try await base.write(body) }
    }

    func write<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        metrics.storeTransaction(write: true)
        return try await writes.noting { try await base.write(appendingEvents: body) }
    }

    func close() { base.close() }

    func lease(_ name: String) -> any Lease { base.lease(name) }

    // Every requirement with a default must be forwarded too, or the default hides the base's answer
    // (`StoreHealthTests` caught `health` reading "no problems" through this wrapper).
    var health: StoreHealth {
        var health = base.health
        if writes.areFailing { health.problems.append("store_writes_failing") }
        return health
    }

    var writerExecutor: (any WriterExecutor)? { base.writerExecutor }

    func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool {
        base.observeCommits(observer)
    }

    func stopObservingCommits() { base.stopObservingCommits() }
}

/// Whether a store's writes are failing: the last write it refused as unavailable (a full disk,
/// out of memory, an I/O error, PostgreSQL down) came after the last that committed, and less
/// than `window` ago. `/readyz` reads only, and said "ok" while every write failed on a full
/// disk (a review of the failure contract, 2026-12-05). Cleared by the next write that commits.
final class WriteOutcomes: Sendable {
    static let window: Duration = .seconds(60)
    private let state = Mutex<(failed: ContinuousClock.Instant?, committed: ContinuousClock.Instant?)>((nil, nil))

    /// Runs `write`, noting whether it committed or the store refused it as unavailable (a
    /// client's mistake, a conflict or a rule is neither: the store worked).
    func noting<T>(_ write: () async throws -> T) async throws -> T {
        do {
            let value = try await write()
            state.withLock { $0.committed = .now }
            return value
        } catch {
            if case .unavailable? = error as? StoreError { state.withLock { $0.failed = .now } }
            throw error
        }
    }

    var areFailing: Bool {
        state.withLock { state in
            guard let failed = state.failed else { return false }
            if let committed = state.committed, committed > failed { return false }
            return ContinuousClock.now - failed < Self.window
        }
    }
}
