import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

@Suite struct OrdersConformanceTests {
    @Test(arguments: Backend.allCases) func anInsertedOrderReadsBackWithItsStagesAndDocuments(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let inserted = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, driver: fixture.alice.id, status: .assigned))
            }
            #expect(inserted.id != nil)
            #expect(inserted.stages.allSatisfy { $0.id != nil })
            #expect(inserted.documents.allSatisfy { $0.id != nil })
            let read = try await store.read { tx in try tx.order(inserted.id!, in: fixture.acme.id) }
            #expect(read == inserted)
            #expect(read?.stages.map(\.address) == ["1 Dock Road", "9 Rue Haute"])
        }
    }

    @Test(arguments: Backend.allCases) func textKeepsNonASCII(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            var order = sampleOrder(in: fixture.acme.id, title: "Zürich → Łódź 🚚 \"quoted\" \\ back'slash")
            order.notes = "line\nbreak\ttab"
            let toInsert = order
            let inserted = try await store.write { tx in try tx.insertOrder(toInsert) }
            let read = try await store.read { tx in try tx.order(inserted.id!, in: fixture.acme.id) }
            #expect(read?.title == "Zürich → Łódź 🚚 \"quoted\" \\ back'slash")
            #expect(read?.notes == "line\nbreak\ttab")
        }
    }

    @Test(arguments: Backend.allCases) func anotherCompanysOrderIsNotFound(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            #expect(try await store.read { tx in try tx.order(order.id!, in: fixture.globex.id) } == nil)
            var foreign = order
            foreign.companyID = fixture.globex.id
            await #expect(throws: StoreError.notFound) {
                try await store.write { [foreign] tx in try tx.updateOrder(foreign) }
            }
            await #expect(throws: StoreError.notFound) {
                try await store.write { tx in try tx.deleteOrder(order.id!, in: fixture.globex.id) }
            }
        }
    }

    @Test(arguments: Backend.allCases) func updateSyncsStagesAndAddsNewDocuments(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            var changed = order
            changed.title = "Pallets to Lille"
            changed.status = .assigned
            changed.driverID = fixture.bob.id
            changed.version = 2
            changed.updatedAt = t0 + 60
            // Keep the delivery (moved first, completed), drop the pickup, add a stop.
            var delivery = order.stages[1]
            delivery.position = 1
            delivery.completedAt = t0 + 30
            changed.stages = [delivery, Stage(position: 2, kind: .stop, address: "Rest area A1")]
            changed.documents.append(Document(name: "photo.jpg", kind: "photo", createdAt: t0 + 60))

            let updated = try await store.write { [changed] tx in try tx.updateOrder(changed) }
            #expect(updated.title == "Pallets to Lille")
            #expect(updated.version == 2)
            #expect(updated.driverID == fixture.bob.id)
            #expect(updated.stages.map(\.address) == ["9 Rue Haute", "Rest area A1"])
            #expect(updated.stages[0].id == delivery.id, "a listed stage keeps its id")
            #expect(updated.stages[0].completedAt == t0 + 30)
            #expect(updated.stages[1].id != nil && updated.stages[1].id != order.stages[0].id)
            #expect(updated.documents.map(\.name) == ["cmr.pdf", "photo.jpg"])
            #expect(updated.documents.allSatisfy { $0.id != nil })
            #expect(try await store.read { tx in try tx.order(order.id!, in: fixture.acme.id) } == updated)
        }
    }

    /// When only the order's row changes, both stores' `updateOrder` answers with the row as its
    /// UPDATE left it instead of reading it back: every such answer must equal a fresh read, receipts included
    /// (a receipt counts only for the driver assigned now, so a reassignment hides or shows it).
    @Test(arguments: Backend.allCases) func anAnswerBuiltWithoutAReadEqualsTheStoredOrder(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id, alice = fixture.alice.id, bob = fixture.bob.id
            let id = try #require(
                try await store.write { tx in try tx.insertOrder(sampleOrder(in: company, driver: alice, status: .assigned)) }.id)
            _ = try await store.write { tx in try tx.recordSeen(id, version: 1, by: alice, in: company, at: t0 + 7) }
            let steps: [(String, @Sendable (inout Order) -> Void)] = [
                ("notes, times off the millisecond", { $0.notes = "gate 4"; $0.updatedAt = t0 + 0.0004 }),
                ("status", { $0.status = .accepted }),
                ("to another driver: the receipt no longer counts", { $0.driverID = bob }),
                ("back to the driver who saw it: it counts again", { $0.driverID = alice }),
                ("canonically equal notes stay as stored", { $0.notes = "gate 4 cafe\u{301}" }),
                ("", { $0.notes = "gate 4 caf\u{e9}" }),
                ("unassigned", { $0.driverID = nil; $0.status = .new }),
                ("number, title and creation time", { $0.number = "2026/11/0777"; $0.title = "Crates"; $0.createdAt = t0 - 60.0005 }),
            ]
            for (label, change) in steps {
                let answered = try await store.write { tx in
                    var order = try #require(try tx.order(id, in: company))
                    change(&order)
                    order.version += 1
                    return try tx.updateOrder(order)
                }
                let read = try #require(try await store.read { tx in try tx.order(id, in: company) })
                #expect(answered == read, "\(label)")
                #expect(Array(answered.notes.utf8) == Array(read.notes.utf8), "\(label)")
                #expect(answered.seen == read.seen, "\(label)")
                if label.hasPrefix("back to") { #expect(read.seen?.driverID == alice, "the old receipt shows again") }
                if label.hasPrefix("to another") { #expect(read.seen == nil) }
            }
            let final = try #require(try await store.read { tx in try tx.order(id, in: company) })
            #expect(final.seen == nil && final.driverID == nil)
            // Without a read in the same transaction (updateOrder reads the row itself).
            var blind = final
            blind.notes = "no read first"
            blind.version += 1
            let update = blind
            let answered = try await store.write { tx in try tx.updateOrder(update) }
            #expect(answered == (try await store.read { tx in try tx.order(id, in: company) }))
        }
    }

    /// The usual write: the order read (locked) in the transaction, its row changed, stages and
    /// documents as read. Both stores then answer without reading it back; the answer, and a second
    /// update in the same transaction, must be what a fresh read finds.
    @Test(arguments: Backend.allCases) func updatesOfAnOrderReadInTheSameTransactionAnswerAsStored(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let (first, second) = try await store.write { tx in
                var current = try #require(try tx.order(order.id!, in: fixture.acme.id))
                current.status = .assigned
                current.driverID = fixture.bob.id
                current.notes = "ring twice"
                current.version += 1
                current.updatedAt = t0 + 10.0004
                let first = try tx.updateOrder(current)
                var next = first
                next.status = .accepted
                next.version += 1
                next.updatedAt = t0 + 20.0006
                return (first, try tx.updateOrder(next))
            }
            #expect(first.status == .assigned && first.driverID == fixture.bob.id && first.notes == "ring twice")
            #expect(first.stages == order.stages && first.documents == order.documents)
            let stored = try await store.read { tx in try tx.order(order.id!, in: fixture.acme.id) }
            #expect(second == stored)
            #expect(second.status == .accepted && second.version == order.version + 2)
        }
    }

    @Test(arguments: Backend.allCases) func aStageIDOfAnotherOrderIsTreatedAsANewStage(_ backend: Backend) async throws
    {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let (mine, theirs) = try await store.write { tx in
                (
                    try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "1")),
                    try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2"))
                )
            }
            var changed = mine
            changed.stages = [Stage(id: theirs.stages[0].id, position: 1, kind: .stop, address: "Hijack")]
            let updated = try await store.write { [changed] tx in try tx.updateOrder(changed) }
            #expect(updated.stages.count == 1)
            #expect(updated.stages[0].id != theirs.stages[0].id)
            #expect(try await store.read { tx in try tx.order(theirs.id!, in: fixture.acme.id) } == theirs)
        }
    }

    @Test(arguments: Backend.allCases) func updatingOrDeletingAMissingOrderIsNotFound(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            var ghost = sampleOrder(in: fixture.acme.id)
            await #expect(throws: StoreError.notFound) {
                try await store.write { [ghost] tx in try tx.updateOrder(ghost) }
            }
            ghost.id = OrderID(4242)
            await #expect(throws: StoreError.notFound) {
                try await store.write { [ghost] tx in try tx.updateOrder(ghost) }
            }
            await #expect(throws: StoreError.notFound) {
                try await store.write { tx in try tx.deleteOrder(OrderID(4242), in: fixture.acme.id) }
            }
        }
    }

    @Test(arguments: Backend.allCases) func deletingAnOrderRemovesStagesAndDocumentsButKeepsItsEvents(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
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
            let events = try await store.read { tx in try tx.events(after: .zero, limit: 10) }
            #expect(events.map(\.event.type) == [.created, .deleted])
            // A new order never reuses the deleted one's id (events and URLs refer to it).
            let next = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            #expect(next.id! > order.id!)
        }
    }

    @Test(arguments: Backend.allCases) func numbersAreUniquePerCompany(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            _ = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2026/11/0007"))
            }
            let error = await #expect(throws: StoreError.self) {
                try await store.write { tx in
                    try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2026/11/0007"))
                }
            }
            guard case .conflict = error else {
                Issue.record("expected a conflict, got \(String(describing: error))")
                return
            }
            // The same number in another company is fine.
            _ = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.globex.id, number: "2026/11/0007"))
            }
            // Renumbering onto a taken number conflicts too.
            var other = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2026/11/0008"))
            }
            other.number = "2026/11/0007"
            let renumbered = other
            await #expect(throws: StoreError.self) { try await store.write { tx in try tx.updateOrder(renumbered) } }
        }
    }

    @Test(arguments: Backend.allCases) func aClosureMayCatchAConflictAndCarryOn(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let numbers = try await store.write { tx in
                _ = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "A"))
                do {
                    _ = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "A"))
                } catch StoreError.conflict {
                    _ = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "B"))
                }
                return try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows.map(\.number)
            }
            #expect(numbers == ["B", "A"])
        }
    }

    @Test(arguments: Backend.allCases) func anUnknownDriverIsAConflictNotAFailure(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let error = await #expect(throws: StoreError.self) {
                try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id, driver: UserID(999)))
                }
            }
            guard case .conflict = error else {
                Issue.record("expected a conflict, got \(String(describing: error))")
                return
            }
        }
    }

    /// An update to an unknown driver of an order read in the same transaction, followed by its
    /// event, fails the write with a conflict and writes neither, whether the event is appended
    /// inside the closure or with the commit (PostgreSQL sends such an update with the statement
    /// after it, and the append with the COMMIT: the failure comes back there).
    @Test(arguments: Backend.allCases) func anUpdateToAnUnknownDriverFailsWithItsEventAndWritesNothing(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let newest = try await store.read { tx in try tx.newestEventID() }
            @Sendable func change(_ tx: any StoreWriter) throws -> [OrderEvent] {
                guard var loaded = try tx.order(order.id!, in: fixture.acme.id) else { throw StoreError.notFound }
                loaded.driverID = UserID(999)
                loaded.status = .assigned
                loaded.version += 1
                let saved = try tx.updateOrder(loaded)
                return Broadcaster.events(for: .updated(before: order, after: saved), at: t0)
            }
            let inside = await #expect(throws: StoreError.self) {
                try await store.write { tx in try tx.appendEvents(try change(tx)) }
            }
            let atCommit = await #expect(throws: StoreError.self) {
                try await store.write(appendingEvents: { tx in ((), try change(tx)) })
            }
            for error in [inside, atCommit] {
                guard case .conflict = error else {
                    Issue.record("expected a conflict, got \(String(describing: error))")
                    continue
                }
            }
            let (after, newestAfter) = try await store.read { tx in
                (try tx.order(order.id!, in: fixture.acme.id), try tx.newestEventID())
            }
            #expect(after == order)
            #expect(newestAfter == newest)
        }
    }

    /// `write(appendingEvents:)` returns the closure's value and the events as stored, numbered
    /// after every earlier one, exactly as they read back; with no events it appends nothing.
    @Test(arguments: Backend.allCases) func eventsAppendedWithTheCommitAreStoredAndNumberedInOrder(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let first = try await store.write { tx in
                try tx.appendEvents([createdEvent(try tx.insertOrder(sampleOrder(in: fixture.acme.id)))])
            }
            let base = first[0].id.rawValue
            let (order, stored) = try await store.write(appendingEvents: { tx in
                let order = try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2026/11/0002"))
                return (order, [createdEvent(order), createdEvent(order)])
            })
            #expect(stored.map(\.id) == [EventID(base + 1), EventID(base + 2)])
            #expect(stored.allSatisfy { $0.event.orderID == order.id })
            let read = try await store.read { tx in try tx.events(after: first[0].id, limit: 10) }
            #expect(read == stored)
            let (value, none) = try await store.write(appendingEvents: { tx in
                (try tx.order(order.id!, in: fixture.acme.id)?.id, [OrderEvent]())
            })
            #expect(value == order.id)
            #expect(none.isEmpty)
            #expect(try await store.read { tx in try tx.newestEventID() } == stored[1].id)
        }
    }

    @Test(arguments: Backend.allCases) func orderSequencesCountPerCompanyAndMonth(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let sequences = try await store.write { tx in
                [
                    try tx.nextOrderSequence(company: fixture.acme.id, year: 2026, month: 11),
                    try tx.nextOrderSequence(company: fixture.acme.id, year: 2026, month: 11),
                    try tx.nextOrderSequence(company: fixture.globex.id, year: 2026, month: 11),
                    try tx.nextOrderSequence(company: fixture.acme.id, year: 2026, month: 12),
                    try tx.nextOrderSequence(company: fixture.acme.id, year: 2027, month: 11),
                    try tx.nextOrderSequence(company: fixture.acme.id, year: 2026, month: 11),
                ]
            }
            #expect(sequences == [1, 2, 1, 1, 1, 3])
        }
    }

    @Test(arguments: Backend.allCases) func summariesFilterByDriverAndStatusNewestFirstWithinOneCompany(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let (a, b, c) = try await store.write { tx in
                (
                    try tx.insertOrder(
                        sampleOrder(in: fixture.acme.id, number: "1", driver: fixture.alice.id, status: .assigned)),
                    try tx.insertOrder(sampleOrder(in: fixture.acme.id, number: "2")),
                    try tx.insertOrder(
                        sampleOrder(in: fixture.acme.id, number: "3", driver: fixture.alice.id, status: .accepted))
                )
            }
            _ = try await store.write { tx in
                try tx.insertOrder(
                    sampleOrder(in: fixture.globex.id, number: "1", driver: fixture.globexDriver.id, status: .assigned))
            }
            let lists = try await store.read { tx in
                (
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows,
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.alice.id, limit: 500)).rows,
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.alice.id, statuses: [.accepted], limit: 500)).rows,
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(statuses: [.new], limit: 500)).rows,
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.bob.id, limit: 500)).rows,
                    try tx.orderPage(in: fixture.globex.id, OrderQuery(limit: 500)).rows
                )
            }
            #expect(lists.0 == [c.summary, b.summary, a.summary])
            #expect(lists.1 == [c.summary, a.summary])
            #expect(lists.2 == [c.summary])
            #expect(lists.3 == [b.summary])
            #expect(lists.4 == [])
            #expect(lists.5.count == 1 && lists.5[0].driverID == fixture.globexDriver.id)
        }
    }
}
