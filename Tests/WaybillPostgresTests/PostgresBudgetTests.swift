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
}
