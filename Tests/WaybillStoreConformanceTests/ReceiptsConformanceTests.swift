import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

/// Read receipts (`recordSeen`, SPEC §2 "Receipts"), on every backend.
@Suite struct ReceiptsConformanceTests {
    /// An order of Acme assigned to Alice, moved on to `version`.
    private func assignedOrder(_ store: any OrderStore, _ fixture: Fixture, version: Int = 3) async throws -> Order {
        try await store.write { tx in
            var order = sampleOrder(in: fixture.acme.id, driver: fixture.alice.id, status: .assigned)
            order.version = version
            return try tx.insertOrder(order)
        }
    }

    private func record(
        _ store: any OrderStore, _ id: OrderID, version: Int, by driver: UserID, in company: CompanyID,
        at: Date = t0 + 10
    ) async throws -> OrderSummary? {
        try await store.write { tx in try tx.recordSeen(id, version: version, by: driver, in: company, at: at) }
    }

    @Test(arguments: Backend.allCases) func theAssignedDriversReceiptShowsOnDetailAndSummary(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await assignedOrder(store, fixture)
            let id = try #require(order.id)
            #expect(order.seen == nil)
            let recorded = try await record(store, id, version: 3, by: fixture.alice.id, in: fixture.acme.id)
            let receipt = OrderReceipt(driverID: fixture.alice.id, version: 3, at: t0 + 10)
            #expect(recorded?.seen == receipt)
            #expect(recorded?.id == id)
            #expect(recorded?.version == 3, "a receipt is not a change of the order")
            let detail = try await store.read { tx in try tx.order(id, in: fixture.acme.id) }
            #expect(detail?.seen == receipt)
            #expect(detail?.version == 3)
            #expect(detail?.updatedAt == order.updatedAt)
            let page = try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery(ids: [id])) }
            #expect(page.rows.map(\.seen) == [receipt])
            let active = try await store.read { tx in
                try tx.orderPage(in: fixture.acme.id, OrderQuery(activeOnly: true))
            }
            #expect(active.rows.first { $0.id == id }?.seen == receipt)
        }
    }

    @Test(arguments: Backend.allCases) func onlyNewerVersionsUpToTheCurrentOneAreRecorded(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let id = try #require(try await assignedOrder(store, fixture, version: 5).id)
            let (alice, acme) = (fixture.alice.id, fixture.acme.id)
            #expect(try await record(store, id, version: 6, by: alice, in: acme) == nil, "above the current version")
            // Past 32 bits too (PostgreSQL typed the version as `orders.version`, 32 bits, and
            // failed the whole write).
            #expect(try await record(store, id, version: Int(Int32.max) + 1, by: alice, in: acme) == nil)
            #expect(try await record(store, id, version: 0, by: alice, in: acme) == nil)
            #expect(try await record(store, id, version: 4, by: alice, in: acme, at: t0 + 1)?.seen?.version == 4)
            #expect(
                try await record(store, id, version: 4, by: alice, in: acme, at: t0 + 2) == nil,
                "the same version again")
            #expect(try await record(store, id, version: 3, by: alice, in: acme, at: t0 + 3) == nil, "an older version")
            #expect(try await record(store, id, version: 5, by: alice, in: acme, at: t0 + 4)?.seen?.version == 5)
            let seen = try await store.read { tx in try tx.order(id, in: acme)?.seen }
            #expect(seen == OrderReceipt(driverID: alice, version: 5, at: t0 + 4))
        }
    }

    @Test(arguments: Backend.allCases) func anotherDriverOrCompanyCannotRecord(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let id = try #require(try await assignedOrder(store, fixture).id)
            #expect(try await record(store, id, version: 3, by: fixture.bob.id, in: fixture.acme.id) == nil)
            #expect(try await record(store, id, version: 3, by: fixture.globexDriver.id, in: fixture.globex.id) == nil)
            #expect(try await record(store, id, version: 3, by: fixture.alice.id, in: fixture.globex.id) == nil)
            #expect(
                try await record(store, OrderID(999_999), version: 1, by: fixture.alice.id, in: fixture.acme.id) == nil)
            #expect(try await store.read { tx in try tx.order(id, in: fixture.acme.id)?.seen } == nil)
        }
    }

    /// After a reassignment the old driver's receipt no longer counts, and the new driver's may be
    /// of any version (not only above the old driver's).
    @Test(arguments: Backend.allCases) func aReceiptCountsOnlyForTheDriverItCameFrom(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await assignedOrder(store, fixture, version: 3)
            let id = try #require(order.id)
            let (alice, bob, acme) = (fixture.alice.id, fixture.bob.id, fixture.acme.id)
            _ = try await record(store, id, version: 3, by: alice, in: acme)
            let reassigned = try await store.write { tx in
                var next = order
                next.driverID = bob
                next.version = 4
                return try tx.updateOrder(next)
            }
            #expect(reassigned.seen == nil, "Alice's receipt is not Bob's")
            #expect(
                try await store.read { tx in try tx.orderPage(in: acme, OrderQuery(ids: [id])) }.rows.first?.seen == nil
            )
            #expect(try await record(store, id, version: 4, by: alice, in: acme) == nil, "Alice no longer has it")
            let bobs = try await record(store, id, version: 2, by: bob, in: acme, at: t0 + 20)
            #expect(bobs?.seen == OrderReceipt(driverID: bob, version: 2, at: t0 + 20))
        }
    }

    @Test(arguments: Backend.allCases) func savingAnOrderKeepsItsReceipt(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await assignedOrder(store, fixture, version: 3)
            let id = try #require(order.id)
            _ = try await record(store, id, version: 3, by: fixture.alice.id, in: fixture.acme.id)
            let saved = try await store.write { tx in
                var next = try #require(try tx.order(id, in: fixture.acme.id))
                next.title = "Renamed"
                next.version = 4
                next.seen = nil  // saving never writes the receipt
                return try tx.updateOrder(next)
            }
            #expect(saved.seen == OrderReceipt(driverID: fixture.alice.id, version: 3, at: t0 + 10))
        }
    }

    /// `order_seen` events keep the version seen through the outbox (a replay rebuilds the frame).
    @Test(arguments: Backend.allCases) func seenEventsKeepTheirVersionInTheOutbox(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let id = try #require(try await assignedOrder(store, fixture).id)
            let stored = try await store.write { tx in
                let summary = try #require(
                    try tx.recordSeen(id, version: 2, by: fixture.alice.id, in: fixture.acme.id, at: t0 + 10))
                return try tx.appendEvents(
                    Broadcaster.events(for: .seen(summary, company: fixture.acme.id), at: t0 + 10))
            }
            #expect(stored.count == 1)
            let read = try await store.read { tx in
                try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 10)
            }
            #expect(read == stored)
            #expect(read.first?.event.type == .seen)
            #expect(read.first?.event.seenVersion == 2)
            #expect(read.first?.event.driverID == fixture.alice.id)
            let toDriver = try await store.read { tx in
                try tx.events(of: .driver(fixture.alice.id), after: .zero, limit: 10)
            }
            #expect(toDriver.isEmpty)
        }
    }
}
