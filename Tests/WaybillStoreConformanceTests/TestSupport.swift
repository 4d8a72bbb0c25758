import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// The store implementations every conformance case runs against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// A clock the test sets by hand; stamped on events as `committed_at` and on logouts.
final class ManualClock: Sendable {
    private let current: Mutex<Date>
    init(_ start: Date = t0) { current = Mutex(start) }
    var now: Date { current.withLock { $0 } }
    func set(_ date: Date) { current.withLock { $0 = date } }
    var function: @Sendable () -> Date { { self.now } }
}

/// A fixed, millisecond-aligned instant: what goes in comes back equal.
let t0 = Date(timeIntervalSince1970: 1_764_500_000)

/// A fresh, empty store of `backend`: SQLite in a new temp directory, PostgreSQL as a new
/// database on the test process's shared server.
func makeStore(
    _ backend: Backend, clock: ManualClock = ManualClock()
) async throws -> (any OrderStore, cleanUp: @Sendable () async -> Void) {
    switch backend {
    case .sqlite:
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("waybill-conformance-\(UUID().uuidString)", isDirectory: true)
        let store = try SQLiteOrderStore(
            path: directory.appendingPathComponent("waybill.sqlite").path, readerCount: 2, clock: clock.function)
        return (store, { try? FileManager.default.removeItem(at: directory) })
    case .postgres:
        let url = try await runBlocking {
            try PostgresServer.shared().createDatabase(template: MigratedTemplate.database.get())
        }
        let store = try await postgresStore(url: url, clock: clock)
        // Dropped afterwards: on a server of WAYBILL_TEST_DATABASE_URL nothing else would.
        return (store, { _ = try? await runBlocking { try PostgresServer.shared().dropDatabase(url) } })
    }
}

/// A database migrated once per test process, which every case copies: the copy is a file
/// copy, much cheaper than running the schema's DDL for each case (the migrations themselves
/// are tested in WaybillPostgresTests).
enum MigratedTemplate {
    static let database: Result<String, any Error> = Result {
        let url = try PostgresServer.shared().createDatabase()
        try PostgresOrderStore(url: url, writerCount: 1, readerCount: 1).close()
        return String(url.split(separator: "/").last ?? "")
    }
}

/// A PostgreSQL store on `url`, opened off the cooperative pool (opening blocks while it migrates).
func postgresStore(url: String, clock: ManualClock = ManualClock()) async throws -> PostgresOrderStore {
    try await runBlocking {
        try PostgresOrderStore(url: url, writerCount: 2, readerCount: 2, clock: clock.function)
    }
}

/// Runs `body` with a fresh store of `backend`, and closes it afterwards.
func withStore<T>(
    _ backend: Backend, clock: ManualClock = ManualClock(), _ body: (any OrderStore) async throws -> T
) async throws -> T {
    let (store, cleanUp) = try await makeStore(backend, clock: clock)
    let result = await Result { try await body(store) }
    store.close()
    await cleanUp()
    return try result.get()
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing body.
    init(_ body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

/// What the seeded tests work with: two companies, a dispatcher and two drivers in the first.
struct Fixture: Sendable {
    var acme: Company
    var globex: Company
    var dispatcher: User
    var alice: User
    var bob: User
    var globexDriver: User

    static func seed(_ store: any OrderStore) async throws -> Fixture {
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

/// Expects `error` to be `StoreError.conflict`.
func expectConflict(_ error: (any Error)?, sourceLocation: SourceLocation = #_sourceLocation) {
    guard case .conflict? = error as? StoreError else {
        Issue.record("expected a conflict, got \(String(describing: error))", sourceLocation: sourceLocation)
        return
    }
}
