public import Foundation
import Synchronization
public import WaybillDomain
public import WaybillStorage

// What the store tests of every backend seed and compare with: the SQLite store's own tests and the
// conformance suite (one body per case, run against SQLite and PostgreSQL) share these, so a case
// means the same data in both.

/// A fixed, millisecond-aligned instant: what goes in comes back equal.
public let t0 = Date(timeIntervalSince1970: 1_764_500_000)

/// A clock the test sets by hand; stamped on events as `committed_at` and on logouts.
public final class ManualClock: Sendable {
    private let current: Mutex<Date>
    public init(_ start: Date = t0) { current = Mutex(start) }
    public var now: Date { current.withLock { $0 } }
    public func set(_ date: Date) { current.withLock { $0 = date } }
    public func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
    /// The clock as a store takes it.
    public var function: @Sendable () -> Date { { self.now } }
}

/// What the seeded tests work with: two companies, a dispatcher and two drivers in the first,
/// one driver in the second.
public struct Fixture: Sendable {
    public var acme: Company
    public var globex: Company
    public var dispatcher: User
    public var alice: User
    public var bob: User
    public var globexDriver: User

    public static func seed(_ store: any OrderStore) async throws -> Fixture {
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
public func sampleOrder(
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
public func createdEvent(_ order: Order, at date: Date = t0) -> OrderEvent {
    Broadcaster.events(for: .created(order), at: date)[0]
}
