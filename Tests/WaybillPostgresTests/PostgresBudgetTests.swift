import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillTesting

@testable import WaybillPostgres

/// A call's time budget starts when it is made, so load can spend most of it in the queue: what is
/// left then is not PostgreSQL's fault, and must not mark a live server down (503 for every call on
/// the node and every connection dropped).
@Suite(.timeLimit(.minutes(1))) struct PostgresBudgetTests {
    /// Runs `body` on a session of a fresh migrated database, on a thread of its own: these calls
    /// block for up to 2.5 s by design, and on the 2-thread cooperative pool of a 2-core machine two
    /// of them at once stalled every other suite in the process (a Redis timeout test then measured
    /// its publish at 2.1 s instead of 0.5). The session is made, used and closed on that thread.
    private static func withSession<T: Sendable>(
        _ body: @escaping @Sendable (PostgresSession, PostgresTransactionRunner) throws -> T
    ) async throws -> T {
        let url = try await freshDatabase()
        _ = try await openStore(url).close()  // migrated
        let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-budget")
        return try await runBlocking {
            let session = PostgresSession(settings: settings.forPool, health: PostgresHealth())
            defer { session.close() }
            return try body(session, PostgresTransactionRunner(kind: .write, clock: { Date() }))
        }
    }

    @Test func aCallThatLeftTheQueueWithAlmostNoBudgetIsRefusedAsOverloadedAndHealthIsUntouched() async throws {
        let (refused, admitted) = try await Self.withSession { session, runner in
            let result = runner.run(
                { tx in try tx.insertCompany(name: "late") }, on: session, deadline: .now + .milliseconds(50))
            return (isUnavailable(result), session.health.admit() == .proceed)
        }
        #expect(refused, "refused before BEGIN")
        #expect(admitted, "not taken for a dead server")
    }

    @Test func aTimeoutWithLessThanAFairShareOfTheBudgetDoesNotMarkTheServerDown() async throws {
        let (refused, admitted, generation) = try await Self.withSession { session, runner in
            // 700 ms left when it leaves the queue; the closure is slow, and its query finds the deadline gone.
            let result = runner.run(
                { tx in
                    Thread.sleep(forTimeInterval: 0.8)
                    return try tx.insertCompany(name: "slow")
                }, on: session, deadline: .now + .milliseconds(700))
            return (isUnavailable(result), session.health.admit() == .proceed, session.health.generation)
        }
        #expect(refused)
        #expect(admitted, "a short budget running out says nothing about the server")
        #expect(generation == 0, "connections were not dropped")
    }

    /// A live server that is only slow (a statement longer than what is left of a fair budget)
    /// answers with its own timeout before the call's deadline: the call fails alone, and the
    /// server is not taken for a dead one (which answered 503 to every call on the node for a
    /// while and dropped every connection).
    @Test func aSlowStatementOnALiveServerFailsAloneAndTheServerStaysUp() async throws {
        let (slow, admitted, generation, next) = try await Self.withSession { session, runner in
            let result = runner.run(
                { tx in _ = try tx.execute("SELECT pg_sleep(3)") }, on: session, deadline: .now + .milliseconds(2500))
            var slow: String?
            if isUnavailable(result), case .failure(let error) = result { slow = "\(error)" }
            let admitted = session.health.admit() == .proceed
            let generation = session.health.generation
            let next = runner.run({ tx in try tx.insertCompany(name: "next") }, on: session, deadline: .now + .seconds(2))
            return (slow, admitted, generation, (try? next.get()) != nil)
        }
        // Unavailable, and the server's own statement timeout came first (57014), not the client's deadline.
        #expect(slow?.contains("57014") == true, "\(slow ?? "it did not fail as unavailable")")
        #expect(admitted, "a busy server is not a dead one")
        #expect(generation == 0, "connections were not dropped")
        #expect(next)
    }

    /// A server out of connection slots (here a role limited to one) refuses a second worker's
    /// connect: that call fails as busy, and the node's working connections stay (taking it for an
    /// outage answered 503 to every call for a while and dropped them all).
    @Test func aServerOutOfConnectionSlotsIsNotTakenForADeadOne() async throws {
        let role = "lim_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
        let (served, refused, generation, stillServes) = try await runBlocking {
            let server = try PostgresServer.shared()
            _ = try server.psql("CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1")
            let base = try server.createDatabase()
            _ = try server.psql("ALTER DATABASE \(databaseName(base)) OWNER TO \(role)")
            let url = "postgresql://\(role)@\(server.host):\(server.port)/\(databaseName(base))"
            let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-slots")
            let health = PostgresHealth()
            let first = PostgresSession(settings: settings.forPool, health: health)
            let second = PostgresSession(settings: settings.forPool, health: health)
            defer {
                first.close()
                second.close()
            }
            let runner = PostgresTransactionRunner(kind: .read, clock: { Date() })
            let probe: (PostgresOrderStore.Transaction) throws -> Void = { tx in _ = try tx.execute("SELECT 1") }
            let served = (try? runner.run(probe, on: first, deadline: .now + .seconds(3)).get()) != nil
            let refused = isUnavailable(runner.run(probe, on: second, deadline: .now + .seconds(3)))
            let generation = health.generation
            let stillServes = (try? runner.run(probe, on: first, deadline: .now + .seconds(3)).get()) != nil
            return (served, refused, generation, stillServes)
        }
        #expect(served)
        #expect(refused, "the second connection is over the role's limit")
        #expect(generation == 0, "the working connection was not dropped")
        #expect(stillServes, "and still serves")
    }
}
