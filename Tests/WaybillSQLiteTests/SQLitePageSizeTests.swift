import Foundation
import Testing
import WaybillDomain
import WaybillStorage

@testable import WaybillSQLite

/// New files use 1 KiB pages (a WAL commit writes and checksums each dirty page in full; see
/// `SQLiteOrderStore.newDatabasePageSize`); a file made with SQLite's default keeps it and works.
@Suite struct SQLitePageSizeTests {
    @Test func aNewDatabaseHasOneKilobytePages() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }
        store.close()
        #expect(try rawQuery(database.path, "PRAGMA page_size") == ["1024"])
        #expect(try rawQuery(database.path, "PRAGMA journal_mode") == ["wal"])

        let reopened = try SQLiteOrderStore(path: database.path, readerCount: 1)
        defer { reopened.close() }
        #expect(try await reopened.read { tx in try tx.company(company.id) } == company)
    }

    /// A database an older build made with 4 KiB pages (already in WAL mode, with data): the store
    /// opens it, migrates it, writes and reads it, and its pages stay 4 KiB (SQLite cannot change
    /// the page size of a WAL file; the PRAGMA must not fail there).
    @Test func anExistingDatabaseKeepsItsPageSize() async throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let raw = try database.openRawConnection()
        try raw.executeScript(
            "PRAGMA page_size = 4096; PRAGMA journal_mode = WAL; CREATE TABLE older (x INTEGER); INSERT INTO older VALUES (1);")
        raw.close()

        let store = try SQLiteOrderStore(path: database.path, readerCount: 1)
        let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }
        #expect(try await store.read { tx in try tx.company(company.id) } == company)
        store.close()
        #expect(try rawQuery(database.path, "PRAGMA page_size") == ["4096"])
        #expect(try rawQuery(database.path, "SELECT x FROM older") == ["1"])
    }
}
