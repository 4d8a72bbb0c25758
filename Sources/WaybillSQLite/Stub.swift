// TEMPORARY compile-only stand-in, removed when the real store lands.
public import WaybillStorage

public final class SQLiteOrderStore: OrderStore {
    public init(path: String, readerCount: Int = 4) throws { fatalError("not implemented") }
    public func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T { fatalError() }
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T { fatalError() }
    public func close() {}
}
