import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

/// SQLite specifics (NUL in text, cascades seen on disk); the rest is in WaybillStoreConformanceTests.
@Suite struct SQLiteOrderStoreOrdersTests {
    @Test func textKeepsEmbeddedNULsAndNonASCII() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            var order = sampleOrder(in: fixture.acme.id, title: "Zürich → Łódź \u{0}tail 🚚")
            order.notes = "a\u{0}b"
            let toInsert = order
            let inserted = try await store.write { tx in try tx.insertOrder(toInsert) }
            let read = try await store.read { tx in try tx.order(inserted.id!, in: fixture.acme.id) }
            #expect(read?.title == "Zürich → Łódź \u{0}tail 🚚")
            #expect(read?.notes == "a\u{0}b")
        }
    }

    @Test func deletingAnOrderRemovesStagesAndDocumentsButKeepsItsEvents() async throws {
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in
                let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id))
                _ = try tx.appendEvents([createdEvent(order)])
                return order
            }
            try await store.write { tx in
                try tx.deleteOrder(order.id!, in: fixture.acme.id)
                _ = try tx.appendEvents(Broadcaster.events(for: .deleted(order), at: t0))
            }
            #expect(try await store.read { tx in try tx.order(order.id!, in: fixture.acme.id) } == nil)
            #expect(
                try rawQuery(path, "SELECT (SELECT count(*) FROM stages) + (SELECT count(*) FROM documents)") == ["0"])
            let events = try await store.read { tx in try tx.events(after: .zero, limit: 10) }
            #expect(events.map(\.event.type) == [.created, .deleted])
            // A new order never reuses the deleted one's id (events and URLs refer to it).
            let next = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            #expect(next.id! > order.id!)
        }
    }
}
