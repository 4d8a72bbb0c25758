import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

@testable import WaybillSQLite

/// A database file in its own fresh temporary directory (which does not exist yet: the store
/// must create it). `remove()` deletes the directory.
struct TemporaryDatabase {
    let directory: URL
    var path: String { directory.appendingPathComponent("nested/waybill.sqlite").path }

    init() {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("waybill-sqlite-tests", isDirectory: true)
            .appendingPathComponent(UUID().uuidString, isDirectory: true)
    }

    func remove() { try? FileManager.default.removeItem(at: directory) }

    /// A plain connection on `path`, its directory made first: for tests below the store (the
    /// schema steps themselves, or a file as an older build left it).
    func openRawConnection() throws -> SQLiteConnection {
        try FileManager.default.createDirectory(
            at: URL(fileURLWithPath: path).deletingLastPathComponent(), withIntermediateDirectories: true)
        return try SQLiteConnection(path: path)
    }
}

/// Runs `body` with a fresh store on a fresh file, and closes it afterwards.
func withStore<T>(
    readers: Int = 2, clock: ManualClock = ManualClock(), busyTimeout: Duration = .seconds(5),
    _ body: (SQLiteOrderStore, String) async throws -> T
) async throws -> T {
    let database = TemporaryDatabase()
    defer { database.remove() }
    // Opening and closing block (threads started and joined, migrations, the last checkpoint):
    // off the cooperative pool, which every test in the process shares.
    let (path, function) = (database.path, clock.function)
    let store = try await runBlocking {
        try SQLiteOrderStore(path: path, readerCount: readers, busyTimeout: busyTimeout, clock: function)
    }
    let result = await outcome { try await body(store, path) }
    _ = try? await runBlocking { store.close() }
    return try result.get()
}

/// Blocks the calling (store) thread until `condition` holds or 10 s pass; tests use it to
/// hold the writer thread while they queue a batch behind it.
func spin(until condition: () -> Bool) {
    let deadline = Date() + 10
    while !condition() && Date() < deadline { usleep(500) }
}

/// Rows of `sql` on a separate raw connection: what another process would see.
func rawQuery(_ path: String, _ sql: String, column: Int32 = 0) throws -> [String] {
    let db = try SQLiteConnection(path: path)
    defer { db.close() }
    return try db.query(sql) { $0.text(column) }
}

/// A flag set on the store's writer thread and polled by the test.
final class Flag: Sendable {
    private let value = Mutex(false)
    func set() { value.withLock { $0 = true } }
    var isSet: Bool { value.withLock { $0 } }
}

/// Holds the writer thread inside a write until `count` more writes are queued behind it, so
/// those run as one batch. Returns once the gate is holding; await the task to release it.
func holdWriter(_ store: SQLiteOrderStore, until count: Int) async throws -> Task<Void, any Error> {
    let holding = Flag()
    let gate = Task {
        try await store.write { _ in
            holding.set()
            spin { store.pendingWriteCount >= count }
        }
    }
    let deadline = Date() + 10
    while !holding.isSet && Date() < deadline { try await Task.sleep(for: .milliseconds(1)) }
    return gate
}

