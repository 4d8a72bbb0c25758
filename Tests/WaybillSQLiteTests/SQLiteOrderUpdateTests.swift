import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// `updateOrder` writes only what changed (fewer dirty pages per write), and still everything that did.
@Suite struct SQLiteOrderUpdateTests {
    /// Rows changed by `body` on the writer connection (SQLite's `total_changes()`).
    private static func rowsChanged(
        _ tx: any StoreWriter, _ body: (any StoreWriter) throws -> Void
    ) throws -> Int {
        let db = (tx as! SQLiteOrderStore.Transaction).db
        let before = try db.queryFirst("SELECT total_changes()") { $0.int(0) } ?? 0
        try body(tx)
        return (try db.queryFirst("SELECT total_changes()") { $0.int(0) } ?? 0) - before
    }

    @Test func anUpdateThatKeepsTheStagesWritesOnlyTheOrderRow() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id
            let inserted = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company)) }
            let (changed, saved) = try await store.write { tx in
                var order = try #require(try tx.order(inserted.id!, in: company))
                order.notes = "handle with care"
                order.version += 1
                var saved: Order?
                let changed = try Self.rowsChanged(tx) { tx in saved = try tx.updateOrder(order) }
                return (changed, saved)
            }
            #expect(changed == 1)  // before: 1 order row + 2 stage rows, rewritten unchanged
            let read = try #require(try await store.read { tx in try tx.order(inserted.id!, in: company) })
            #expect(read.notes == "handle with care")
            #expect(read.version == inserted.version + 1)
            #expect(read.stages == inserted.stages)
            #expect(saved == read)
        }
    }

    @Test func everyChangedColumnAndStageIsStillWritten() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id, driver = fixture.alice.id
            let inserted = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company)) }
            // Without a read first in the same transaction (the row is read by updateOrder itself).
            var order = inserted
            order.number = "2026/11/0099"
            order.status = .assigned
            order.driverID = driver
            order.title = "Pallets to Lille"
            order.createdAt = t0 + 60
            order.updatedAt = t0 + 120
            order.version += 1
            order.stages[0].address = "2 Dock Road"
            order.stages[1].completedAt = t0 + 90
            order.stages.append(Stage(position: 3, kind: .delivery, address: "5 Quai Nord"))
            let update = order
            let (changed, saved) = try await store.write { tx in
                var saved: Order?
                let changed = try Self.rowsChanged(tx) { tx in saved = try tx.updateOrder(update) }
                return (changed, saved)
            }
            // The order, two changed stages, one new stage; and three counters (migration 0016):
            // the company's `new` and `assigned`, and Alice's `assigned`.
            #expect(changed == 7)
            let read = try #require(try await store.read { tx in try tx.order(inserted.id!, in: company) })
            #expect(saved == read, "what an update answers is the order as stored, new stage ids included")
            #expect(read.number == "2026/11/0099")
            #expect(read.status == .assigned)
            #expect(read.driverID == driver)
            #expect(read.title == "Pallets to Lille")
            #expect(read.createdAt == t0 + 60)
            #expect(read.updatedAt == t0 + 120)
            #expect(read.stages.map(\.address) == ["2 Dock Road", "9 Rue Haute", "5 Quai Nord"])
            #expect(read.stages[1].completedAt == t0 + 90)

            // Dropping a stage deletes it; an order of another company is not found.
            var fewer = read
            fewer.stages.removeLast()
            fewer.version += 1
            let dropped = fewer
            _ = try await store.write { tx in try tx.updateOrder(dropped) }
            #expect(try await store.read { tx in try tx.order(inserted.id!, in: company) }?.stages.count == 2)

            // A new document only (the stages kept): answered with its id, as stored.
            var documented = try #require(try await store.read { tx in try tx.order(inserted.id!, in: company) })
            documented.documents.append(Document(name: "pod.pdf", kind: "pod", createdAt: t0 + 5))
            documented.version += 1
            let withDocument = documented
            let answered = try await store.write { tx in try tx.updateOrder(withDocument) }
            let stored = try await store.read { tx in try tx.order(inserted.id!, in: company) }
            #expect(answered == stored)
            #expect(answered.documents.count == 2 && answered.documents.allSatisfy { $0.id != nil })
            var foreign = dropped
            foreign.companyID = fixture.globex.id
            let stranger = foreign
            await #expect(throws: StoreError.notFound) { try await store.write { tx in try tx.updateOrder(stranger) } }
        }
    }
}
