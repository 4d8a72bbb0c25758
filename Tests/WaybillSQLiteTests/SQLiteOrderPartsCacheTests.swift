import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting
import WaybillTesting

/// `OrderPartsCache`: a write reads the order's row, and its stages and documents only when the
/// cache does not know them at the row's version; whatever the cache answers equals the file.
@Suite struct SQLiteOrderPartsCacheTests {
    /// A write of the notes, as `OrderService` makes one: read, change, bump the version.
    private func editNotes(_ store: SQLiteOrderStore, _ id: OrderID, _ company: CompanyID, _ notes: String) async throws -> Order {
        try await store.write { tx in
            var order = try #require(try tx.order(id, in: company))
            order.notes = notes
            order.version += 1
            order.updatedAt = t0 + Double(order.version)
            return try tx.updateOrder(order)
        }
    }

    /// A store with one seeded company and `sampleOrder` (two stages, one document) in it.
    private func withOrder(_ body: (SQLiteOrderStore, String, Order, CompanyID) async throws -> Void) async throws {
        try await withStore { store, path in
            let company = try await Fixture.seed(store).acme.id
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company)) }
            try await body(store, path, order, company)
        }
    }

    /// A store with one seeded company and an order of its driver Alice, written once (so the
    /// cache holds it): the store, the order's id, the company, the driver, and the order as written.
    private func withCachedDriverOrder(
        _ body: (SQLiteOrderStore, OrderID, CompanyID, UserID, Order) async throws -> Void
    ) async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id, driver = fixture.alice.id
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company, driver: driver)) }
            let id = try #require(order.id)
            let cached = try await editNotes(store, id, company, "cached")
            try await body(store, id, company, driver, cached)
        }
    }

    /// `sql` (one `?`: the order's id) on a connection of its own, as another process or node
    /// writing the file would; then the order's version moves on, as any writer's change does.
    private func writeElsewhere(_ path: String, _ sql: String, bumpingVersionOf id: OrderID) throws {
        try writeElsewhere(path, sql, of: id)
        try writeElsewhere(path, "UPDATE orders SET version = version + 1 WHERE id = ?", of: id)
    }

    /// `sql` (one `?`: the order's id) on a connection of its own; the version stays.
    private func writeElsewhere(_ path: String, _ sql: String, of id: OrderID) throws {
        let other = try SQLiteConnection(path: path)
        defer { other.close() }
        try other.execute(sql, [.id(id)])
    }

    private func stored(_ store: SQLiteOrderStore, _ id: OrderID, _ company: CompanyID) async throws -> Order? {
        try await store.read { tx in try tx.order(id, in: company) }
    }

    @Test func aWriteAfterAWriteTakesTheStagesAndDocumentsFromTheCache() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            let first = try await editNotes(store, id, company, "one")
            let afterFirst = try #require(store.orderPartsCache)
            let second = try await editNotes(store, id, company, "two")
            // The whole order: its row too, as no statement changed it since the first write.
            #expect(store.orderPartsCache?.rowHits == afterFirst.rowHits + 1, "the second write's read was answered")
            #expect(second.stages == order.stages && second.documents == order.documents)
            #expect(try await stored(store, id, company) == second)
            #expect(first.version + 1 == second.version)
        }
    }

    /// A write that kept the parts at a new version and then rolled back leaves no entry for that
    /// version: another process may commit the same version with other parts (here a raw
    /// connection, as another node or `waybill` process on the file would).
    @Test func aWriteThatRolledBackLeavesNoEntry() async throws {
        struct Refused: Error {}
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            await #expect(throws: Refused.self) {
                try await store.write { tx in
                    var changed = try #require(try tx.order(id, in: company))
                    changed.notes = "undone"
                    changed.version += 1
                    _ = try tx.updateOrder(changed)
                    throw Refused()
                }
            }
            try writeElsewhere(path, "UPDATE stages SET address = 'Elsewhere' WHERE order_id = ?", bumpingVersionOf: id)
            let next = try await editNotes(store, id, company, "after")
            #expect(next.stages.map(\.address) == ["Elsewhere", "Elsewhere"])
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// The same inside a group commit: a closure that threw is rolled back to its savepoint while
    /// the batch commits, and what it read or kept is not taken.
    @Test func aRolledBackClosureOfACommittedBatchLeavesNoEntry() async throws {
        struct Refused: Error {}
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id
            let (first, second) = try await store.write { tx in
                (try tx.insertOrder(sampleOrder(in: company, number: "A")), try tx.insertOrder(sampleOrder(in: company, number: "B")))
            }
            let refused = try #require(first.id), kept = try #require(second.id)
            let gate = try await holdWriter(store, until: 2)  // the two below run as one batch
            let undone = Task {
                try await store.write { tx in
                    var changed = try #require(try tx.order(refused, in: company))
                    changed.notes = "undone"
                    changed.version += 1
                    _ = try tx.updateOrder(changed)
                    throw Refused()
                }
            }
            let done = Task { try await editNotes(store, kept, company, "kept") }
            await #expect(throws: Refused.self) { try await undone.value }
            _ = try await done.value
            try await gate.value
            #expect(store.orderPartsCache?.entries == 1, "only the committed closure's order")
            try writeElsewhere(path, "UPDATE stages SET address = 'Elsewhere' WHERE order_id = ?", bumpingVersionOf: refused)
            let next = try await editNotes(store, refused, company, "after")
            #expect(next.stages.map(\.address) == ["Elsewhere", "Elsewhere"])
        }
    }

    /// Only this connection's commits are trusted: when anything else wrote the file since (here a
    /// raw connection that changes a stage and leaves the version, as a backup restored under the
    /// server or an older build may), the cache starts over.
    @Test func aFileWrittenByAnotherConnectionIsReadAgainEvenAtTheSameVersion() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "cached")
            #expect(store.orderPartsCache?.entries == 1)
            try writeElsewhere(path, "UPDATE stages SET address = 'Restored' WHERE order_id = ?", of: id)
            let next = try await editNotes(store, id, company, "after")
            #expect(next.stages.map(\.address) == ["Restored", "Restored"])
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// A write of the stages that fails part-way, caught by its closure, which then commits: the
    /// order is dropped from the cache though the write did not finish (it changed some rows).
    @Test func aStagesWriteThatFailsPartWayAndIsCaughtDropsTheEntry() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            let other = try SQLiteConnection(path: path)
            defer { other.close() }
            // A new stage cannot be inserted; changing one in place still works.
            try other.executeScript("CREATE TRIGGER no_new_stage BEFORE INSERT ON stages BEGIN SELECT RAISE(ABORT, 'refused'); END")
            _ = try await editNotes(store, id, company, "cached")  // the cache starts over (another connection wrote)
            let written = try await store.write { tx -> Order in
                var changed = try #require(try tx.order(id, in: company))
                changed.notes = "first"
                changed.version += 1
                let first = try tx.updateOrder(changed)
                // The same version again, now with a stage changed and one added: the change is
                // written, the insert refused, and the closure carries on.
                var more = first
                more.stages[0].address = "Changed in place"
                more.stages.append(Stage(position: 3, kind: .delivery, address: "Never stored"))
                _ = try? tx.updateOrder(more)
                return first
            }
            let next = try await editNotes(store, id, company, "after")
            #expect(next.version == written.version + 1)
            #expect(next.stages.map(\.address) == ["Changed in place", "9 Rue Haute"])
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// An order whose stages and documents are large is not kept (the cache is bounded in bytes).
    @Test func anOrderWithLargePartsIsNotKept() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id
            var big = sampleOrder(in: company)
            big.stages = (1...10).map { Stage(position: $0, kind: .delivery, address: String(repeating: "a", count: 4_000)) }
            let toInsert = big
            let order = try await store.write { tx in try tx.insertOrder(toInsert) }
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "one")
            let next = try await editNotes(store, id, company, "two")
            #expect(store.orderPartsCache?.entries == 0)
            #expect(next.stages.count == 10)
        }
    }

    /// Another process's write moves the version: the cached parts are not used.
    @Test func anotherProcesssWriteIsReadNotTakenFromTheCache() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "cached")
            #expect(store.orderPartsCache?.entries == 1)
            try writeElsewhere(
                path, "INSERT INTO documents (order_id, name, kind, created_at) VALUES (?, 'pod.jpg', 'pod', 0)",
                bumpingVersionOf: id)
            let next = try await editNotes(store, id, company, "after")
            #expect(next.documents.map(\.name) == ["cmr.pdf", "pod.jpg"])
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// A write that changes the stages (a stage completed) or deletes the order drops its entry;
    /// the next write reads the parts as stored.
    @Test func aWriteOfTheStagesOrADeleteDropsTheEntry() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "cached")
            #expect(store.orderPartsCache?.entries == 1)
            let completed = try await store.write { tx in
                var changed = try #require(try tx.order(id, in: company))
                changed.stages[0].completedAt = t0 + 60
                changed.version += 1
                return try tx.updateOrder(changed)
            }
            #expect(store.orderPartsCache?.entries == 0)
            let next = try await editNotes(store, id, company, "after")
            #expect(next.stages == completed.stages && next.stages[0].completedAt != nil)
            #expect(try await stored(store, id, company) == next)
            #expect(store.orderPartsCache?.entries == 1)
            try await store.write { tx in try tx.deleteOrder(id, in: company) }
            #expect(store.orderPartsCache?.entries == 0)
        }
    }

    /// A receipt changes the order's row without telling the cache: the next write reads the row
    /// again (SQLite reported the change), and its answer carries the receipt, as the file does.
    @Test func aReceiptBetweenTwoWritesIsInTheNextWritesAnswer() async throws {
        try await withCachedDriverOrder { store, id, company, driver, first in
            _ = try await store.write { tx in
                try tx.recordSeen(id, version: first.version, by: driver, in: company, at: t0 + 30)
            }
            let rowHits = try #require(store.orderPartsCache?.rowHits)
            let next = try await editNotes(store, id, company, "after")
            #expect(store.orderPartsCache?.rowHits == rowHits, "the row was read, not taken from the cache")
            #expect(next.seen?.version == first.version)
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// The same inside one transaction: a write noted the order's row, then a receipt changed it.
    /// The note is older than the row's last change, so it is not kept: the next write's answer
    /// carries the receipt.
    @Test func aRowChangedAfterItWasNotedInTheSameTransactionIsNotKept() async throws {
        try await withCachedDriverOrder { store, id, company, driver, _ in
            let written = try await store.write { tx -> Order in
                var changed = try #require(try tx.order(id, in: company))
                changed.notes = "noted"
                changed.version += 1
                let written = try tx.updateOrder(changed)
                _ = try tx.recordSeen(id, version: written.version, by: driver, in: company, at: t0 + 30)
                return written
            }
            let next = try await editNotes(store, id, company, "after")
            #expect(next.seen?.version == written.version)
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// The row as another connection left it at the same version (a restore under the server):
    /// read again, as the stages are.
    @Test func aRowWrittenByAnotherConnectionIsReadAgainEvenAtTheSameVersion() async throws {
        try await withOrder { store, path, order, company in
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "cached")
            try writeElsewhere(path, "UPDATE orders SET title = 'Restored' WHERE id = ?", of: id)
            let next = try await editNotes(store, id, company, "after")
            #expect(next.title == "Restored")
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// Inside a transaction, a row some statement changed is read from the file, not from the
    /// cache: the order read after a receipt carries it.
    @Test func aReadAfterAChangeInTheSameTransactionSeesTheChange() async throws {
        try await withCachedDriverOrder { store, id, company, driver, cached in
            let read = try await store.write { tx -> Order? in
                _ = try tx.recordSeen(id, version: cached.version, by: driver, in: company, at: t0 + 30)
                return try tx.order(id, in: company)
            }
            #expect(read?.seen?.version == cached.version)
        }
    }

    /// A cached order is another company's to nobody: a write naming another company finds
    /// nothing, as the row's read does (`WHERE company_id = ?`).
    @Test func aCachedOrderIsNotFoundInAnotherCompany() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id, other = fixture.globex.id
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company)) }
            let id = try #require(order.id)
            _ = try await editNotes(store, id, company, "cached")
            let seenElsewhere = try await store.write { tx in try tx.order(id, in: other) }
            #expect(seenElsewhere == nil)
            // An update naming the other company changes nothing either.
            var foreign = order
            foreign.companyID = other
            foreign.notes = "not mine"
            foreign.version = 3
            let attempt = foreign
            await #expect(throws: StoreError.self) { try await store.write { tx in try tx.updateOrder(attempt) } }
            #expect(try await stored(store, id, company)?.notes == "cached")
        }
    }

    /// In one group commit: a write noted the order's row, then a later closure of the batch
    /// recorded a receipt on it. The note is older than the row: the next write's answer carries
    /// the receipt.
    @Test func aRowChangedByALaterClosureOfTheBatchIsNotKept() async throws {
        try await withCachedDriverOrder { store, id, company, driver, cached in
            let gate = try await holdWriter(store, until: 2)  // the two below run as one batch, in order
            let write = Task { try await editNotes(store, id, company, "noted") }
            // Waited for without holding a pool thread (`spin` here held one of the two for up to 10 s).
            #expect(await eventually { store.pendingWriteCount >= 1 })
            let receipt = Task {
                try await store.write { tx in
                    _ = try tx.recordSeen(id, version: cached.version + 1, by: driver, in: company, at: t0 + 30)
                }
            }
            let written = try await write.value
            try await receipt.value
            try await gate.value
            let next = try await editNotes(store, id, company, "after")
            #expect(next.seen?.version == written.version)
            #expect(try await stored(store, id, company) == next)
        }
    }

    /// A row read in a write that changes nothing (its parts from the cache) is kept: the next
    /// write takes the whole order from memory, and it equals the file.
    @Test func aRowReadWithCachedPartsIsKept() async throws {
        try await withCachedDriverOrder { store, id, company, driver, cached in
            // The receipt drops the row (the parts stay); the read below takes the row from the
            // file and the parts from the cache.
            _ = try await store.write { tx in
                try tx.recordSeen(id, version: cached.version, by: driver, in: company, at: t0 + 30)
            }
            _ = try await store.write { tx in try tx.order(id, in: company) }
            let rowHits = try #require(store.orderPartsCache?.rowHits)
            let next = try await editNotes(store, id, company, "after")
            #expect(store.orderPartsCache?.rowHits == rowHits + 1, "the row read before was kept")
            #expect(next.seen?.version == cached.version)
            #expect(try await stored(store, id, company) == next)
        }
    }
}
