import WaybillDomain
import WaybillObservability
import WaybillStorage

/// A store that counts its transactions in `Metrics` (`waybill_store_transactions_total`).
///
/// The server wraps its store in one at start, so everything it runs (requests, socket
/// authentication, replays, the relay, the feed) is counted at one place, the same for every
/// backend. Counted when the transaction is asked for, whether or not it succeeds.
struct MeteredOrderStore: OrderStore {
    let base: any OrderStore
    let metrics: Metrics

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
        return try await base.write(body)
    }

    func write<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        metrics.storeTransaction(write: true)
        return try await base.write(appendingEvents: body)
    }

    func write<T: Sendable>(
        changing orders: [OrderID], in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        metrics.storeTransaction(write: true)
        return try await base.write(changing: orders, in: company, appendingEvents: body)
    }

    /// Counted when it ran (a value or an error): `nil` ran nothing, and the `write` that follows counts.
    @_specialize(where T == (Order, [StoredEvent]))  // as `SQLiteOrderStore.writeNow`
    func writeNow<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) throws -> T? {
        do {
            guard let value = try base.writeNow(body) else { return nil }
            metrics.storeTransaction(write: true)
            return value
        } catch {
            metrics.storeTransaction(write: true)
            throw error
        }
    }

    func close() { base.close() }

    func lease(_ name: String) -> any Lease { base.lease(name) }

    // Every requirement with a default must be forwarded too, or the default hides the base's answer
    // (`StoreHealthTests` caught `health` reading "no problems" through this wrapper).
    var health: StoreHealth { base.health }

    var writerExecutor: (any WriterExecutor)? { base.writerExecutor }

    func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool {
        base.observeCommits(observer)
    }

    func stopObservingCommits() { base.stopObservingCommits() }
}
