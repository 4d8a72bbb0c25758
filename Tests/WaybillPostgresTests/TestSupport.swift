import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// A PostgreSQL store on `url`, opened off the cooperative pool (opening blocks while it migrates).
///
/// 30 s per call unless a test asks for the product's budget (`PostgresOutageTests` does: it is
/// about that bound): a busy 2-core runner once held a call of the conformance suite past 4.5 s.
func openStore(
    _ url: String, name: String = "waybill", writers: Int = 2, readers: Int = 2,
    callBudget: Duration = .seconds(30)
) async throws
    -> PostgresOrderStore
{
    try await runBlocking {
        try PostgresOrderStore(
            url: url, applicationName: name, writerCount: writers, readerCount: readers, callBudget: callBudget)
    }
}

/// A fresh database on the shared test server.
func freshDatabase() async throws -> String {
    try await runBlocking { try PostgresServer.shared().createDatabase() }
}

/// The database name at the end of a URL.
func databaseName(_ url: String) -> String { String(url.split(separator: "/").last ?? "") }

/// Sessions of `database` inside `pg_sleep` now: a transaction another session holds open that
/// way has run the statements before its sleep (the session's text shows from the moment it
/// arrives, so it cannot tell).
func sleepingSessions(in database: String) async throws -> String {
    try await runBlocking {
        try PostgresServer.shared().psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()",
            database: database)
    }
}

/// Waits up to 10 s until one session of `database` sleeps (`sleepingSessions`).
func oneSessionSleeps(in database: String) async throws -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if (try? await sleepingSessions(in: database)) == "1" { return true }
        try await Task.sleep(for: .milliseconds(20))
    }
    return false
}

/// A company and an order to hang events on.
func seedOrder(_ store: PostgresOrderStore) async throws -> Order {
    try await store.write { tx in
        let company = try tx.insertCompany(name: "Acme")
        return try tx.insertOrder(
            Order(companyID: company.id, number: "2026/11/0001", title: "Pallets", createdAt: t0, updatedAt: t0))
    }
}

/// How long `body` took, with its outcome.
func timed<T>(_ body: () async throws -> T) async -> (Duration, Result<T, any Error>) {
    let start = ContinuousClock.now
    do {
        let value = try await body()
        return (start.duration(to: .now), .success(value))
    } catch {
        return (start.duration(to: .now), .failure(error))
    }
}

/// Whether `result` failed with `StoreError.unavailable`.
func isUnavailable<T>(_ result: Result<T, any Error>) -> Bool {
    if case .failure(let error) = result, case .unavailable? = error as? StoreError { return true }
    return false
}

/// Retries `body` until it succeeds or `timeout` passes; the last error otherwise.
func eventually<T>(timeout: Duration, _ body: () async throws -> T) async throws -> T {
    let deadline = ContinuousClock.now + timeout
    while true {
        do {
            return try await body()
        } catch {
            if ContinuousClock.now >= deadline { throw error }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
