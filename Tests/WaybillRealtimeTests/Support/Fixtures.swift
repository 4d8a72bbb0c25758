import Foundation
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// Event values for the state machines: ids as given, a fixed commit time unless told.
enum Fixtures {
    static func event(_ id: Int64, committedAt seconds: TimeInterval = 0, order: Int64 = 1) -> StoredEvent {
        StoredEvent(
            id: EventID(id),
            event: OrderEvent(
                type: .updated, companyID: 1, orderID: OrderID(order), number: "n", oldStatus: nil, newStatus: .new,
                driverID: nil, changedAt: Date(timeIntervalSince1970: 0), groups: [.company(1)]),
            committedAt: Date(timeIntervalSince1970: seconds))
    }

    static func events(_ ids: ClosedRange<Int64>) -> [StoredEvent] { ids.map { event($0) } }
    /// Events of another history: the same ids, other commit times (so other fingerprints).
    static func events(_ ids: ClosedRange<Int64>, committedAt: TimeInterval) -> [StoredEvent] {
        ids.map { event($0, committedAt: committedAt) }
    }
    static func events(_ ids: [Int64]) -> [StoredEvent] { ids.map { event($0) } }

    /// A quiet logger (tests that care about lines pass their own).
    static let logger = Logger(minimum: .error, sink: { _ in })

    /// An `order_updated` event for order `order` of company 1, to append through a store.
    static func orderEvent(order: Int64 = 1) -> OrderEvent {
        OrderEvent(
            type: .updated, companyID: 1, orderID: OrderID(order), number: "n", oldStatus: nil, newStatus: .new,
            driverID: nil, changedAt: Date(), groups: [.company(1)])
    }
}

/// A real SQLite store in a fresh temporary directory, closed and deleted after `body`.
/// - Parameter clock: the commit time of its events (a fixed one gives two stores the same
///   fingerprints for the same events: a backup and the database it was taken from).
func withStore<T>(
    clock: @escaping @Sendable () -> Date = { Date() }, _ body: (SQLiteOrderStore) async throws -> T
) async throws -> T {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-realtime-\(UUID().uuidString)")
    // Opening and closing block (threads started and joined, migrations, the last checkpoint):
    // off the cooperative pool, which every test in the process shares.
    let path = directory.appendingPathComponent("waybill.sqlite").path
    let store = try await runBlocking { try SQLiteOrderStore(path: path, clock: clock) }
    let result = await outcome { try await body(store) }
    _ = try? await runBlocking {
        store.close()
        try? FileManager.default.removeItem(at: directory)
    }
    return try result.get()
}

extension OrderStore {
    /// Commits `count` events in one transaction, as a write elsewhere (another node) would.
    @discardableResult
    func append(_ count: Int, order: Int64 = 1) async throws -> [StoredEvent] {
        try await write { tx in try tx.appendEvents((0..<count).map { _ in Fixtures.orderEvent(order: order) }) }
    }
}

/// A broker double behind the real protocol: the test decides what subscriptions see
/// (`.lost`, `.subscribed`, batches), and publishes are recorded (or refused).
final class ScriptedBroker: Broker {
    private let subscribers = Mutex<[AsyncStream<BrokerDelivery>.Continuation]>([])
    private let published = Mutex<[EventCursor]>([])
    private let sizes = Mutex<[Int]>([])
    private let refusing = Atomic<Bool>(false)

    func publish(_ events: [StoredEvent]) async throws {
        if refusing.load(ordering: .relaxed) { throw BrokerError("refused by the test") }
        published.withLock { $0 += events.map(\.cursor) }
        sizes.withLock { $0.append(events.count) }
    }

    func subscribe() -> AsyncStream<BrokerDelivery> {
        let (stream, continuation) = AsyncStream.makeStream(of: BrokerDelivery.self)
        continuation.yield(.subscribed)
        subscribers.withLock { $0.append(continuation) }
        return stream
    }

    /// Yields `delivery` on every subscription.
    func send(_ delivery: BrokerDelivery) {
        for continuation in subscribers.withLock({ $0 }) { continuation.yield(delivery) }
    }

    var publishedIDs: [EventID] { published.withLock { $0.map(\.id) } }
    /// The size of each published batch, in order.
    var batchSizes: [Int] { sizes.withLock { $0 } }
    /// What was published, with each event's fingerprint.
    var publishedCursors: [EventCursor] { published.withLock { $0 } }
    /// What the broker says of its subscriptions (`nil`: a network broker's "cannot know").
    let subscriptions = Mutex<Int?>(nil)
    var subscriptionCount: Int? { subscriptions.withLock { $0 } }
    func refuse(_ value: Bool) { refusing.store(value, ordering: .relaxed) }
}

/// A feed target that records what it was given.
final class RecordingTarget: FeedTarget {
    private let state = Mutex<(ids: [EventID], types: [String], rewinds: [EventCursor])>(([], [], []))
    func deliver(_ events: [StoredEvent]) {
        state.withLock {
            $0.ids += events.map(\.id)
            $0.types += events.map(\.event.type.rawValue)
        }
    }
    func historyRewound(to newest: EventCursor) { state.withLock { $0.rewinds.append(newest) } }
    var ids: [Int64] { state.withLock { $0.ids.map(\.rawValue) } }
    /// The kinds delivered, by name, in order.
    var types: [String] { state.withLock { $0.types } }
    var rewinds: [EventCursor] { state.withLock { $0.rewinds } }
}

/// Forwards to one real store, then — when the test says so — to another: what a node sees when
/// its database is restored from a backup or fails over to a standby under it.
final class SwitchableStore: OrderStore {
    private let current: Mutex<any OrderStore>
    init(_ store: any OrderStore) { current = Mutex(store) }
    func switchTo(_ store: any OrderStore) { current.withLock { $0 = store } }

    func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await current.withLock { $0 }.read(body)
    }
    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        try await current.withLock { $0 }.write(body)
    }
    func close() {}
    func lease(_ name: String) -> any Lease { current.withLock { $0 }.lease(name) }
}

/// Passes every call through to `store`, counting reads and writes; `failReads` makes every read
/// fail as a node's would with its pool out of connections (writes and the lease still go through).
final class CountingStore: OrderStore {
    private let store: any OrderStore
    private let counts = Mutex((reads: 0, urgentReads: 0, writes: 0, finishedReads: 0))
    private let failingReads: Bool
    private let writesToFail = Atomic<Int>(0)
    init(_ store: any OrderStore, failReads: Bool = false) {
        self.store = store
        failingReads = failReads
    }
    /// The next `count` writes fail as with a store that is down for a moment.
    func failWrites(_ count: Int) { writesToFail.store(count, ordering: .relaxed) }
    private let urgentReadsToFail = Atomic<Int>(0)
    /// The next `count` urgent reads fail the same way.
    func failUrgentReads(_ count: Int) { urgentReadsToFail.store(count, ordering: .relaxed) }
    /// Every read, urgent ones included.
    var reads: Int { counts.withLock { $0.reads } }
    /// Reads made with `urgentRead` (the live path's).
    var urgentReads: Int { counts.withLock { $0.urgentReads } }
    var writes: Int { counts.withLock { $0.writes } }
    /// Reads that have returned (their snapshot taken and answered), failed ones included.
    var finishedReads: Int { counts.withLock { $0.finishedReads } }

    func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        counts.withLock { $0.reads += 1 }
        defer { counts.withLock { $0.finishedReads += 1 } }
        if failingReads { throw StoreError.unavailable("no connection slot") }
        return try await store.read(body)
    }
    func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        counts.withLock {
            $0.reads += 1
            $0.urgentReads += 1
        }
        defer { counts.withLock { $0.finishedReads += 1 } }
        if failingReads { throw StoreError.unavailable("no connection slot") }
        if urgentReadsToFail.load(ordering: .relaxed) > 0 {
            urgentReadsToFail.subtract(1, ordering: .relaxed)
            throw StoreError.unavailable("store down for a moment")
        }
        return try await store.urgentRead(body)
    }
    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        counts.withLock { $0.writes += 1 }
        if writesToFail.load(ordering: .relaxed) > 0 {
            writesToFail.subtract(1, ordering: .relaxed)
            throw StoreError.unavailable("store down for a moment")
        }
        return try await store.write(body)
    }
    private let changing = Mutex<[(orders: [OrderID], company: CompanyID)]>([])
    /// The orders each `write(changing:in:appendingEvents:)` named, in call order.
    var changedOrders: [[OrderID]] { changing.withLock { $0.map(\.orders) } }
    /// The company each `write(changing:in:appendingEvents:)` named, in call order.
    var changedCompanies: [CompanyID] { changing.withLock { $0.map(\.company) } }
    func write<T: Sendable>(
        changing orders: [OrderID], in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        changing.withLock { $0.append((orders, company)) }
        return try await write(appendingEvents: body)  // through `write`: counted, and failed when asked
    }
    func close() {}
    func lease(_ name: String) -> any Lease { store.lease(name) }
}
