import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// A PostgreSQL store on `url`, opened off the cooperative pool (opening blocks while it migrates).
///
/// 30 s per call and 10 s per connect unless a test asks for the product's bounds
/// (`PostgresOutageTests` does: it is about them): a busy 2-core runner once held a call of the
/// conformance suite past 4.5 s, and another a connect past 2 s.
func openStore(
    _ url: String, name: String = "waybill", writers: Int = 2, readers: Int = 2,
    callBudget: Duration = .seconds(30), connectTimeout: Duration = .seconds(10)
) async throws
    -> PostgresOrderStore
{
    try await runBlocking {
        try PostgresOrderStore(
            url: url, applicationName: name, writerCount: writers, readerCount: readers, callBudget: callBudget,
            connectTimeout: connectTimeout)
    }
}

/// A fresh database on the shared test server.
func freshDatabase() async throws -> String {
    try await runBlocking { try PostgresServer.shared().createDatabase() }
}

/// The database name at the end of a URL.
func databaseName(_ url: String) -> String { String(url.split(separator: "/").last ?? "") }

/// SQL for another session (`PostgresServer.psql`): runs `statements` in a transaction and keeps
/// it open, sleeping in short steps, until `condition` holds, then commits. `condition` must read
/// what changes under a running statement: rows of a table (each step reads them afresh) or
/// `pg_locks`, not the catalog (`to_regclass` of a table made meanwhile stays null). After 20 s without it
/// the session fails, which rolls the statements back (and `psql` throws). A hold for a fixed time
/// instead could end before a slow runner got to the check that needs it open.
func heldTransaction(_ statements: String, until condition: String) -> String {
    """
    BEGIN; \(statements);
    DO $$ DECLARE started timestamptz := clock_timestamp(); BEGIN
        LOOP
            EXIT WHEN \(condition);
            IF clock_timestamp() - started > interval '20 seconds' THEN
                RAISE EXCEPTION 'held for 20 s: nothing ended the hold';
            END IF;
            PERFORM pg_sleep(0.02);
        END LOOP;
    END $$;
    COMMIT;
    """
}

/// Runs `sql` with `psql` in `database` of the shared server (its `postgres` database by default:
/// the server's own views, `pg_stat_activity`, `pg_locks`), on a thread of its own (it blocks).
func psql(_ sql: String, in database: String = "postgres") async throws -> String {
    try await runBlocking { try PostgresServer.shared().psql(sql, database: database) }
}

/// Waits up to 10 s until a session of `database` sleeps in `pg_sleep`: a `heldTransaction` has run
/// its statements (a session's text shows from the moment it arrives, so it cannot tell).
func aSessionSleeps(in database: String) async throws -> Bool {
    await eventually(timeout: .seconds(10), poll: .milliseconds(20)) {
        let sleeping = try? await psql(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' AND datname = current_database()",
            in: database)
        return sleeping == "1"
    }
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

/// Refused at once because its order is paused after a lock timeout (not after waiting for the lock).
func isRefusedForThePause<T>(_ result: Result<T, any Error>) -> Bool {
    if case .failure(let error) = result, case .unavailable(let why)? = error as? StoreError {
        return why.contains("stays locked")
    }
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
