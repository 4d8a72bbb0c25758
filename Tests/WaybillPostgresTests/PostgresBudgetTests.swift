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
    private static func session() async throws -> PostgresSession {
        let url = try await freshDatabase()
        _ = try await openStore(url).close()  // migrated
        let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-budget")
        return PostgresSession(settings: settings.forPool, health: PostgresHealth())
    }

    @Test func aCallThatLeftTheQueueWithAlmostNoBudgetIsRefusedAsOverloadedAndHealthIsUntouched() async throws {
        let session = try await Self.session()
        defer { session.close() }
        let runner = PostgresTransactionRunner(kind: .write, clock: { Date() })
        let result = runner.run({ tx in try tx.insertCompany(name: "late") }, on: session, deadline: .now + .milliseconds(50))
        #expect(isUnavailable(result), "refused before BEGIN")
        #expect(session.health.admit() == .proceed, "not taken for a dead server")
    }

    @Test func aTimeoutWithLessThanAFairShareOfTheBudgetDoesNotMarkTheServerDown() async throws {
        let session = try await Self.session()
        defer { session.close() }
        let runner = PostgresTransactionRunner(kind: .write, clock: { Date() })
        // 700 ms left when it leaves the queue; the closure is slow, and its query finds the deadline gone.
        let result = runner.run(
            { tx in
                Thread.sleep(forTimeInterval: 0.8)
                return try tx.insertCompany(name: "slow")
            }, on: session, deadline: .now + .milliseconds(700))
        #expect(isUnavailable(result))
        #expect(session.health.admit() == .proceed, "a short budget running out says nothing about the server")
        #expect(session.health.generation == 0, "connections were not dropped")
    }

    /// A live server that is only slow (a statement longer than what is left of a fair budget)
    /// answers with its own timeout before the call's deadline: the call fails alone, and the
    /// server is not taken for a dead one (which answered 503 to every call on the node for a
    /// while and dropped every connection).
    @Test func aSlowStatementOnALiveServerFailsAloneAndTheServerStaysUp() async throws {
        let session = try await Self.session()
        defer { session.close() }
        let runner = PostgresTransactionRunner(kind: .write, clock: { Date() })
        let result = runner.run(
            { tx in _ = try tx.execute("SELECT pg_sleep(3)") }, on: session, deadline: .now + .milliseconds(2500))
        #expect(isUnavailable(result))
        // The server's own statement timeout came first (57014), not the client's deadline.
        if case .failure(let error) = result { #expect("\(error)".contains("57014"), "\(error)") }
        #expect(session.health.admit() == .proceed, "a busy server is not a dead one")
        #expect(session.health.generation == 0, "connections were not dropped")
        let next = runner.run({ tx in try tx.insertCompany(name: "next") }, on: session, deadline: .now + .seconds(2))
        #expect((try? next.get()) != nil)
    }

    /// A server out of connection slots (here a role limited to one) refuses a second worker's
    /// connect: that call fails as busy, and the node's working connections stay (taking it for an
    /// outage answered 503 to every call for a while and dropped them all).
    @Test func aServerOutOfConnectionSlotsIsNotTakenForADeadOne() async throws {
        let role = "lim_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(8)
        let url = try await runBlocking { () throws -> String in
            let server = try PostgresServer.shared()
            _ = try server.psql("CREATE ROLE \(role) LOGIN CONNECTION LIMIT 1")
            let base = try server.createDatabase()
            _ = try server.psql("ALTER DATABASE \(databaseName(base)) OWNER TO \(role)")
            return "postgresql://\(role)@\(server.host):\(server.port)/\(databaseName(base))"
        }
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
        #expect((try? runner.run(probe, on: first, deadline: .now + .seconds(3)).get()) != nil)
        let refused = runner.run(probe, on: second, deadline: .now + .seconds(3))
        #expect(isUnavailable(refused), "the second connection is over the role's limit")
        #expect(health.generation == 0, "the working connection was not dropped")
        #expect((try? runner.run(probe, on: first, deadline: .now + .seconds(3)).get()) != nil, "and still serves")
    }
}
