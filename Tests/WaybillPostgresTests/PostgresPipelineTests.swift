import Foundation
import Testing
import WaybillTesting

@testable import WaybillPostgres

/// `PostgresConnection.executePipeline`: several statements in one round trip (libpq's pipeline
/// mode), on a real server.
@Suite(.timeLimit(.minutes(1))) struct PostgresPipelineTests {
    private static func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection, ContinuousClock.Instant) throws -> T
    ) async throws -> T {
        let url = try await freshDatabase()
        let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-pipeline")
        return try await runBlocking {
            let deadline = ContinuousClock.now + .seconds(20)
            let db = try PostgresConnection(settings.forPool, deadline: deadline)
            defer { db.close() }
            return try body(db, deadline)
        }
    }

    /// A pool session's backend finds a dead client by itself within seconds (its own keepalives):
    /// one cut off in the middle of a pipeline would otherwise hold the event counter's lock for the
    /// system default of two hours. Checked on the server, which is what applies them.
    @Test func poolSessionsUseShortServerSideKeepalives() async throws {
        let values = try await Self.withConnection { db, deadline in
            try ["tcp_keepalives_idle", "tcp_keepalives_interval", "tcp_keepalives_count", "tcp_user_timeout"].map {
                try db.executePipeline([PostgresStatement("SHOW \($0)")], deadline: deadline)[0].text(0, 0)
            }
        }
        #expect(values == ["5", "2", "2", "10000"])
    }

    @Test func eachStatementGetsItsOwnResultInOrder() async throws {
        let (texts, answered) = try await Self.withConnection { db, deadline in
            let results = try db.executePipeline(
                [
                    PostgresStatement("SELECT $1::text", [.text("one")]),
                    PostgresStatement("SELECT 'two' WHERE false"),
                    PostgresStatement("SELECT $1::bigint + 1", [.integer(2)]),
                ], deadline: deadline)
            return (results.map { $0.rowCount == 0 ? "none" : $0.text(0, 0) }, db.answeredInLastPipeline)
        }
        #expect(texts == ["one", "none", "3"])
        #expect(answered == 3)
    }

    /// Outside a transaction a pipeline is one implicit transaction: a failure throws, skips the
    /// statements after it, undoes the ones before it, and leaves the connection ready for more.
    @Test func aFailureSkipsTheRestUndoesTheBatchAndLeavesTheConnectionUsable() async throws {
        let (state, count, next, usable) = try await Self.withConnection { db, deadline in
            try db.executeScript("CREATE TABLE probe (n int)", deadline: deadline)
            var state: String?
            do throws(PostgresError) {
                _ = try db.executePipeline(
                    [
                        PostgresStatement("INSERT INTO probe VALUES (1)"),
                        PostgresStatement("SELECT 1 / $1::int", [.integer(0)]),
                        PostgresStatement("INSERT INTO probe VALUES (3)"),
                    ], deadline: deadline)
            } catch {
                state = error.sqlState
            }
            let count = try db.queryFirst("SELECT count(*) FROM probe", deadline: deadline) { $0.text(0) }
            let next = try db.executePipeline(
                [PostgresStatement("SELECT 4"), PostgresStatement("SELECT 5")], deadline: deadline
            ).map { $0.text(0, 0) }
            return (state, count, next, db.isUsable && !db.isInTransaction)
        }
        #expect(state == "22012", "division by zero")
        #expect(count == "0")
        #expect(next == ["4", "5"])
        #expect(usable)
    }

    /// Inside a transaction, a failure leaves it failed (to be rolled back), as a lone statement does.
    @Test func aFailureInsideATransactionLeavesItFailed() async throws {
        let (failed, afterRollback) = try await Self.withConnection { db, deadline in
            try db.executeScript("BEGIN", deadline: deadline)
            _ = try? db.executePipeline(
                [PostgresStatement("SELECT 1"), PostgresStatement("SELECT 1 / 0")], deadline: deadline)
            let failed = db.isInFailedTransaction
            try db.executeScript("ROLLBACK", deadline: deadline)
            return (failed, db.isInTransaction)
        }
        #expect(failed)
        #expect(!afterRollback)
    }

    /// A connection whose backend is terminated during a pipeline is closed, and says so.
    @Test func aTerminatedBackendMidPipelineIsALostConnection() async throws {
        let (kind, usable) = try await Self.withConnection { db, deadline in
            var kind: PostgresError.Kind?
            do throws(PostgresError) {
                _ = try db.executePipeline(
                    [
                        PostgresStatement("SELECT 1"),
                        PostgresStatement("SELECT pg_terminate_backend(pg_backend_pid())"),
                        PostgresStatement("SELECT 3"),
                    ], deadline: deadline)
            } catch {
                kind = error.kind
            }
            return (kind, db.isUsable)
        }
        #expect(kind == .connectionLost)
        #expect(!usable)
    }
}
