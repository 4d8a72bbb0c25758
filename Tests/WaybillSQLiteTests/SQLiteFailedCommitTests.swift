import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage
import WaybillTesting

@testable import WaybillSQLite
import WaybillStoreTesting

/// A commit whose WAL bytes the file system refuses (a full disk, an I/O error), through SQLite and
/// the whole store: the writer's caller hears the failure, and nothing of the write exists
/// anywhere — not for the commit observer (so no driver is told of it), not for a read, not in
/// the file after a reopen. The write's gathered bytes are the commit's only copy
/// (`WALGathering`), so this is the path where a lost byte would turn into a lost or phantom write.
@Suite(.timeLimit(.minutes(1))) struct SQLiteFailedCommitTests {
    private final class Heard: Sendable {
        private let ids = Mutex<[EventID]>([])
        func add(_ events: [StoredEvent]) { ids.withLock { $0 += events.map(\.id) } }
        var all: [EventID] { ids.withLock { $0 } }
    }

    /// Edits the order's notes and appends one event for it, in one write.
    private static func edit(
        _ store: SQLiteOrderStore, _ id: OrderID, in company: CompanyID, notes: String
    ) async throws -> (order: Order, event: EventID) {
        try await store.write { tx in
            guard var order = try tx.order(id, in: company) else { throw StoreError.notFound }
            order.notes = notes
            order.version += 1
            let saved = try tx.updateOrder(order)
            return (saved, try tx.appendEvents([createdEvent(saved)])[0].id)
        }
    }

    @Test func aCommitTheFileSystemRefusesLeavesNothingAndTheNextWriteTakesItsPlace() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let path = database.path
        let store = try await runBlocking { try SQLiteOrderStore(path: path, readerCount: 1) }
        let fixture = try await Fixture.seed(store)
        let company = fixture.acme.id
        let inserted = try await store.write { tx in try tx.insertOrder(sampleOrder(in: company)) }
        let orderID = try #require(inserted.id)
        let first = try await Self.edit(store, orderID, in: company, notes: "first")
        let heard = Heard()
        #expect(store.observeCommits { heard.add($0) })

        #expect(store.failNextWALFlush())
        await #expect {
            _ = try await Self.edit(store, orderID, in: company, notes: "refused")
        } throws: { error in
            guard case StoreError.unavailable = error else { return false }
            return true
        }
        #expect(heard.all.isEmpty, "a driver must not hear of a write that does not exist")
        let read = try await store.read { tx in try tx.order(orderID, in: company) }
        #expect(read == first.order)
        #expect(try await store.read { tx in try tx.newestEventID() } == first.event)

        // The store goes on: the next write gets the version and the event id the refused one
        // would have had (its ids never existed), and is the only one heard.
        let next = try await Self.edit(store, orderID, in: company, notes: "kept")
        #expect(next.order.version == first.order.version + 1)
        #expect(next.order.notes == "kept")
        #expect(next.event == EventID(first.event.rawValue + 1))
        #expect(heard.all == [next.event])

        // What is in the file, read by a store that starts from it alone.
        _ = try await runBlocking { store.close() }
        let reopened = try await runBlocking { try SQLiteOrderStore(path: path, readerCount: 1) }
        defer { reopened.close() }
        #expect(try await reopened.read { tx in try tx.order(orderID, in: company) } == next.order)
        #expect(try await reopened.read { tx in try tx.newestEventID() } == next.event)
    }

    /// Writes that shared the refused commit (a group commit) all hear the failure, none is heard
    /// by the observer, and none of their changes exist.
    @Test func everyWriteOfARefusedGroupCommitFails() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let company = fixture.acme.id
            var orders: [Order] = []
            for number in 1...3 {
                orders.append(try await store.write { tx in try tx.insertOrder(sampleOrder(in: company, number: "\(number)")) })
            }
            let newest = try await store.read { tx in try tx.newestEventID() }
            let heard = Heard()
            #expect(store.observeCommits { heard.add($0) })
            // Armed first: the writer connection is busy once the gate holds it. The gate's own
            // write changes nothing, so it writes no WAL frame and the batch's commit meets the fault.
            #expect(store.failNextWALFlush())
            let gate = try await holdWriter(store, until: orders.count)
            let failures = try await withThrowingTaskGroup(of: Bool.self) { group in
                for order in orders {
                    group.addTask {
                        do {
                            _ = try await Self.edit(store, order.id!, in: company, notes: "refused")
                            return false
                        } catch StoreError.unavailable {
                            return true
                        }
                    }
                }
                try await gate.value
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(failures == orders.count)
            #expect(heard.all.isEmpty)
            #expect(try await store.read { tx in try tx.newestEventID() } == newest)
            for order in orders {
                #expect(try await store.read { tx in try tx.order(order.id!, in: company) } == order)
            }
        }
    }
}
