public import WaybillDomain
public import WaybillStorage

/// Migration 0016's count of the orders already stored, tested on both stores
/// (`SQLiteMigrationsTests`, `PostgresMigrationsTests`; each removes the migration its own way):
/// the orders written before it, a write after it, and the counts expected after each.
public enum OrderCountsBackfill {
    /// The counts of Acme, of Alice and of Bob.
    public struct Counts: Equatable, Sendable {
        public var company: [OrderStatus: Int]
        public var alice: [OrderStatus: Int]
        public var bob: [OrderStatus: Int]
    }

    /// Nine orders of Acme, with Alice, no one and Bob as drivers in turn; the first four completed,
    /// the others assigned.
    public static func writeOrders(_ store: any OrderStore, _ fixture: Fixture) async throws {
        let drivers: [UserID?] = [fixture.alice.id, nil, fixture.bob.id]
        try await store.write { tx in
            for index in 0..<9 {
                _ = try tx.insertOrder(
                    sampleOrder(
                        in: fixture.acme.id, number: "O-\(index)", driver: drivers[index % 3],
                        status: index < 4 ? .completed : .assigned))
            }
        }
    }

    /// After `writeOrders`: Alice has 0 and 3 completed, 6 assigned; Bob 2 completed, 5 and 8 assigned.
    public static let counted = Counts(
        company: [.completed: 4, .assigned: 5], alice: [.completed: 2, .assigned: 1], bob: [.completed: 1, .assigned: 2])

    /// One more order for Bob (number "O-9"), and Alice's assigned order completed.
    public static func writeAfter(_ store: any OrderStore, _ fixture: Fixture) async throws {
        try await store.write { tx in
            _ = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "O-9", driver: fixture.bob.id, status: .assigned))
            let page = try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.alice.id, statuses: [.assigned]))
            guard let first = page.rows.first, var order = try tx.order(first.id, in: fixture.acme.id) else {
                throw StoreError.notFound
            }
            order.status = .completed
            order.version += 1
            _ = try tx.updateOrder(order)
        }
    }

    /// After `writeAfter`.
    public static let kept = Counts(
        company: [.completed: 5, .assigned: 5], alice: [.completed: 3], bob: [.completed: 1, .assigned: 3])

    /// The counts as the store answers them now.
    public static func counts(_ store: any OrderStore, _ fixture: Fixture) async throws -> Counts {
        try await store.read { tx in
            Counts(
                company: try tx.orderCounts(in: fixture.acme.id, driver: nil),
                alice: try tx.orderCounts(in: fixture.acme.id, driver: fixture.alice.id),
                bob: try tx.orderCounts(in: fixture.acme.id, driver: fixture.bob.id))
        }
    }
}
