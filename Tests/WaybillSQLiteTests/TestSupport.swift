import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

/// A database file in its own fresh temporary directory (which does not exist yet: the store
/// must create it). `remove()` deletes the directory.
struct TemporaryDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent("nested/waybill.sqlite").path }

    init() {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("waybill-sqlite-tests", isDirectory: true)
            .appendingPathComponent(UUID().uuidString, isDirectory: true)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// A clock the test sets by hand; stamped on events as `committed_at`.
final class ManualClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = t0) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func set(_ date: Date) { current.withLock { $0 = date } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
    var function: @Sendable () -> Date { { self.now } }
}

/// A fixed, millisecond-aligned instant: what goes in comes back equal.
let t0 = Date(timeIntervalSince1970: 1_764_500_000)

/// Runs `body` with a fresh store on a fresh file, and closes it afterwards.
func withStore<T>(
    readers: Int = 2, clock: ManualClock = ManualClock(),
    _ body: (SQLiteOrderStore, String) async throws -> T
) async throws -> T {
    let database = TemporaryDatabase()
    defer { database.remove() }
    let store = try SQLiteOrderStore(path: database.path, readerCount: readers, clock: clock.function)
    defer { store.close() }
    return try await body(store, database.path)
}

/// What the seeded tests work with: two companies, a dispatcher and two drivers in the first.
struct Fixture: Sendable {
    var acme: Company
    var globex: Company
    var dispatcher: User
    var alice: User
    var bob: User
    var globexDriver: User

    static func seed(_ store: SQLiteOrderStore) async throws -> Fixture {
        try await store.write { tx in
            let acme = try tx.insertCompany(name: "Acme")
            let globex = try tx.insertCompany(name: "Globex")
            return Fixture(
                acme: acme, globex: globex,
                dispatcher: try tx.insertUser(
                    companyID: acme.id, role: .dispatcher, email: "dispatch@acme.test", name: "Dora", passwordHash: "h1"
                ),
                alice: try tx.insertUser(
                    companyID: acme.id, role: .driver, email: "alice@acme.test", name: "Alice", passwordHash: "h2"),
                bob: try tx.insertUser(
                    companyID: acme.id, role: .driver, email: "bob@acme.test", name: "Bob", passwordHash: "h3"),
                globexDriver: try tx.insertUser(
                    companyID: globex.id, role: .driver, email: "gus@globex.test", name: "Gus", passwordHash: "h4"))
        }
    }
}

/// A new order (no ids) with two stages and one document.
func sampleOrder(
    in company: CompanyID, number: String = "2026/11/0001", driver: UserID? = nil, status: OrderStatus = .new,
    title: String = "Pallets to Lyon"
) -> Order {
    Order(
        companyID: company, number: number, status: status, driverID: driver, title: title, notes: "fragile",
        stages: [
            Stage(position: 1, kind: .pickup, address: "1 Dock Road", plannedAt: t0 + 3600),
            Stage(position: 2, kind: .delivery, address: "9 Rue Haute", plannedAt: t0 + 7200),
        ],
        documents: [Document(name: "cmr.pdf", kind: "cmr", createdAt: t0)],
        createdAt: t0, updatedAt: t0)
}

/// An `order_created` event of `order` for its company's groups (and its driver's).
func createdEvent(_ order: Order, at date: Date = t0) -> OrderEvent {
    Broadcaster.events(for: .created(order), at: date)[0]
}

/// Blocks the calling (store) thread until `condition` holds or 10 s pass; tests use it to
/// hold the writer thread while they queue a batch behind it.
func spin(until condition: () -> Bool) {
    let deadline = Date() + 10
    while !condition() && Date() < deadline { usleep(500) }
}

/// Rows of `sql` on a separate raw connection: what another process would see.
func rawQuery(_ path: String, _ sql: String, column: Int32 = 0) throws -> [String] {
    let db = try SQLiteConnection(path: path)
    defer { db.close() }
    return try db.query(sql) { $0.text(column) }
}

/// Polls `condition` every 10 ms until it holds or `timeout` passes; its last value.
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// A flag set on the store's writer thread and polled by the test.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// Holds the writer thread inside a write until `count` more writes are queued behind it, so
/// those run as one batch. Returns once the gate is holding; await the task to release it.
func holdWriter(_ store: SQLiteOrderStore, until count: Int) async throws -> Task<Void, any Error> {
    let holding = Flag()
    let gate = Task {
        try await store.write { _ in
            holding.set()
            spin { store.pendingWriteCount >= count }
        }
    }
    let deadline = Date() + 10
    while !holding.isSet && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
    return gate
}

