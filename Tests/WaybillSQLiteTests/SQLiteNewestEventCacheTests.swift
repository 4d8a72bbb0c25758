import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite
import WaybillStoreTesting

private struct CacheTestRefusal: Error {}

/// `NewestEventCache`: an append reads the newest id from the table only when the cache cannot
/// vouch for it (first write, another connection committed, an earlier append in the same
/// transaction), and a rolled-back write leaves no gap.
struct SQLiteNewestEventCacheTests {
    @Test func theCacheVouchesOnlyForTheDataVersionItWasTakenAt() {
        var cache = NewestEventCache()
        cache.began(version: 1)
        #expect(cache.newest(version: 1) == nil, "nothing known yet")
        cache.appending()
        cache.committed(version: 2, lastEvent: 10)

        cache.began(version: 2)
        #expect(cache.newest(version: 2) == 10)
        #expect(cache.newest(version: 3) == nil, "another commit since")
        #expect(cache.newest(version: nil) == nil)
        cache.appending()
        #expect(cache.newest(version: 2) == nil, "this transaction's own ids are not in the cache")
        // Rolled back (no commit): the next transaction still starts from 10.
        cache.began(version: 2)
        #expect(cache.newest(version: 2) == 10)
        // A commit without events (a prune, a login) keeps the id under the new version.
        cache.committed(version: 3, lastEvent: nil)
        cache.began(version: 3)
        #expect(cache.newest(version: 3) == 10)
        // Begun after someone else's commit: a commit without events cannot vouch for anything.
        cache.began(version: 7)
        cache.committed(version: 8, lastEvent: nil)
        cache.began(version: 8)
        #expect(cache.newest(version: 8) == nil)
        // Unknown version: forget.
        cache.committed(version: nil, lastEvent: 20)
        cache.began(version: 8)
        #expect(cache.newest(version: 8) == nil)
        // An append that failed part-way: even a commit naming its last event vouches for nothing.
        cache.committed(version: 9, lastEvent: 30)
        cache.began(version: 9)
        #expect(cache.newest(version: 9) == 30)
        cache.appending()
        cache.forget()
        cache.committed(version: 10, lastEvent: 31)
        cache.began(version: 10)
        #expect(cache.newest(version: 10) == nil)
    }

    /// SQLite undoes only the statement that failed: an append that throws after writing some of
    /// its rows, caught by the closure, commits rows the cache never saw. The next write must read
    /// the table, not reuse an id.
    @Test func anAppendThatFailsPartWayAndIsCaughtIsNotTrusted() async throws {
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let raw = try SQLiteConnection(path: path)
            try raw.executeScript(
                """
                CREATE TRIGGER refuse_boom BEFORE INSERT ON events WHEN NEW.number = 'boom'
                BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;
                """)
            raw.close()
            // After the trigger's commit (another connection): this write reads the table and
            // leaves the cache vouching for its id, which the next write then uses.
            let first = try await store.write { tx in try tx.appendEvents([createdEvent(order)])[0].id }
            let lookups = store.writerStatistics.newestEventLookups
            var boom = createdEvent(order)
            boom.number = "boom"
            let refused = boom
            let caught = try await store.write { tx -> Bool in
                do {
                    _ = try tx.appendEvents([createdEvent(order), refused])  // the first row goes in
                    return false
                } catch {
                    return true  // caught: the transaction commits the first row
                }
            }
            #expect(caught)
            #expect(store.writerStatistics.newestEventLookups == lookups, "the failed append took its id from the cache")
            let next = try await store.write { tx in try tx.appendEvents([createdEvent(order)])[0].id }
            #expect(next == EventID(first.rawValue + 2), "the id after the row the failed append left")
            #expect(
                try await store.read { tx in try tx.events(after: .zero, limit: 10).map(\.id) }
                    == [first, EventID(first.rawValue + 1), next])
        }
    }

    @Test func writesInARowReadTheTableOnceAndARollbackLeavesNoGap() async throws {
        try await withStore { store, _ in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            func append() async throws -> EventID {
                try await store.write { tx in try tx.appendEvents([createdEvent(order)])[0].id }
            }
            let first = try await append()
            let lookups = store.writerStatistics.newestEventLookups
            #expect(lookups >= 1)
            var ids = [first]
            for _ in 0..<5 { ids.append(try await append()) }
            #expect(store.writerStatistics.newestEventLookups == lookups, "later writes took the id from the cache")
            // A write that appends and then throws is rolled back; the next one takes its id.
            await #expect(throws: CacheTestRefusal.self) {
                try await store.write { tx in
                    _ = try tx.appendEvents([createdEvent(order)])
                    throw CacheTestRefusal()
                }
            }
            ids.append(try await append())
            #expect(ids == (0..<7).map { EventID(first.rawValue + Int64($0)) }, "no gap, no repeat")
            #expect(try await store.read { tx in try tx.events(after: .zero, limit: 100).map(\.id) } == ids)
        }
    }

    @Test func aCommitByAnotherConnectionIsSeenByTheNextAppend() async throws {
        try await withStore { store, path in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            func append(_ store: SQLiteOrderStore) async throws -> EventID {
                try await store.write { tx in try tx.appendEvents([createdEvent(order)])[0].id }
            }
            let other = try SQLiteOrderStore(path: path, readerCount: 1)
            defer { other.close() }
            var ids: [EventID] = []
            // This store, this store, the other, this store, this store, the other, this store.
            for index in 0..<7 { ids.append(try await append(index % 3 == 2 ? other : store)) }
            #expect(ids == (1...7).map { EventID(Int64($0)) }, "\(ids)")
            // This store read the table for its first append and after each of the other's commits.
            #expect(store.writerStatistics.newestEventLookups == 3)
        }
    }
}
