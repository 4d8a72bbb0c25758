import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillSQLite
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// The store implementations every conformance case runs against.
enum Backend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres

    var testDescription: String { rawValue }
}

/// A fresh, empty store of `backend`: SQLite in a new temp directory, PostgreSQL as a new
/// database on the test process's shared server.
func makeStore(
    _ backend: Backend, clock: ManualClock = ManualClock()
) async throws -> (any OrderStore, cleanUp: @Sendable () async -> Void) {
    switch backend {
    case .sqlite:
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("waybill-conformance-\(UUID().uuidString)", isDirectory: true)
        let store = try SQLiteOrderStore(
            path: directory.appendingPathComponent("waybill.sqlite").path, readerCount: 2, clock: clock.function)
        return (store, { try? FileManager.default.removeItem(at: directory) })
    case .postgres:
        let url = try await runBlocking {
            try PostgresServer.shared().createDatabase(template: MigratedTemplate.database.get())
        }
        let store = try await postgresStore(url: url, clock: clock)
        // Dropped afterwards: on a server of WAYBILL_TEST_DATABASE_URL nothing else would.
        return (store, { _ = try? await runBlocking { try PostgresServer.shared().dropDatabase(url) } })
    }
}

/// A database migrated once per test process, which every case copies: the copy is a file
/// copy, much cheaper than running the schema's DDL for each case (the migrations themselves
/// are tested in WaybillPostgresTests).
enum MigratedTemplate {
    static let database: Result<String, any Error> = Result {
        let url = try PostgresServer.shared().createDatabase()
        try PostgresOrderStore(url: url, writerCount: 1, readerCount: 1, connectTimeout: .seconds(10)).close()
        return String(url.split(separator: "/").last ?? "")
    }
}

/// A PostgreSQL store on `url`, opened off the cooperative pool (opening blocks while it migrates).
///
/// With a 30 s budget per call instead of the product's 4.5 s: these tests are about what a store
/// answers, not how soon (the budget's own tests: WaybillPostgresTests). A clean-clone CI run
/// failed a filter test with "PostgreSQL did not answer in time" while the suite's parallel cases
/// were copying template databases on a busy 2-core runner.
///
/// And 10 s per connect instead of 2 s, for the same reason: the suite's cases open their stores
/// at once, each a few connections, and a busy runner's server sometimes took longer than 2 s to
/// accept one — at open ("timeout expired while connecting", clean-clone CI 2026-12-06), and in a
/// call, whose worker connects lazily ("PostgreSQL did not answer in time" in `aPrunedEventIsGoneByID`,
/// clean-clone CI 2026-12-07). The connect bound's own tests are in WaybillPostgresTests.
func postgresStore(url: String, clock: ManualClock = ManualClock()) async throws -> PostgresOrderStore {
    try await runBlocking {
        try PostgresOrderStore(
            url: url, writerCount: 2, readerCount: 2, callBudget: .seconds(30), connectTimeout: .seconds(10),
            clock: clock.function)
    }
}

/// Runs `body` with a fresh store of `backend`, and closes it afterwards.
func withStore<T>(
    _ backend: Backend, clock: ManualClock = ManualClock(), _ body: (any OrderStore) async throws -> T
) async throws -> T {
    let (store, cleanUp) = try await makeStore(backend, clock: clock)
    let result = await Result { try await body(store) }
    // Off the cooperative pool: closing joins the store's threads (a PostgreSQL worker may be in a
    // connect), and a blocked pool thread stalls the timed tests that run alongside (one of two).
    _ = try? await runBlocking { store.close() }
    await cleanUp()
    return try result.get()
}

extension Result where Failure == any Error {
    /// The outcome of an async throwing body.
    init(_ body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
    }
}

/// Expects `error` to be `StoreError.conflict`.
func expectConflict(_ error: (any Error)?, sourceLocation: SourceLocation = #_sourceLocation) {
    guard case .conflict? = error as? StoreError else {
        Issue.record("expected a conflict, got \(String(describing: error))", sourceLocation: sourceLocation)
        return
    }
}
