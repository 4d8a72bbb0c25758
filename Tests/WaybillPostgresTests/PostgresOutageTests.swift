import Foundation
import Synchronization
import Testing
import WaybillDomain
@testable import WaybillPostgres
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

/// The server goes away under a running store: calls fail with `unavailable` within the 5 s
/// bound, fail fast while it stays down, and succeed again once it is back, with the same store.
/// Each test runs its own server (they stop, kill or freeze it).
@Suite(.serialized, .timeLimit(.minutes(2))) struct PostgresOutageTests {
    fileprivate func withOwnServer(_ body: (PostgresServer, PostgresOrderStore) async throws -> Void) async throws {
        let server = try await runBlocking { try PostgresServer() }
        let result = await outcome {
            let url = try await runBlocking { try server.createDatabase() }
            let store = try await openStore(
                url, callBudget: PostgresOrderStore.defaultCallBudget, connectTimeout: PostgresOrderStore.defaultConnectTimeout)
            let result = await outcome { try await body(server, store) }
            // Off the cooperative pool: closing joins the store's threads (a call still running
            // against a stopped server holds one for its budget), and removing the server waits
            // for pg_ctl stop and deletes its cluster; inline, these stalled the timed Redis tests.
            _ = try? await runBlocking { store.close() }
            try result.get()
        }
        _ = try? await runBlocking { server.remove() }
        try result.get()
    }

    fileprivate func write(_ store: PostgresOrderStore) async throws -> Company {
        try await store.write { tx in try tx.insertCompany(name: "Acme") }
    }

    @Test func aStoppedServerIsUnavailableQuicklyAndTheStoreRecoversWhenItIsBack() async throws {
        try await withOwnServer { server, store in
            _ = try await write(store)
            try await runBlocking { try server.stop(mode: .immediate) }

            let (first, firstOutcome) = await timed { try await write(store) }
            #expect(isUnavailable(firstOutcome), "\(firstOutcome)")
            #expect(first < .seconds(5))
            for _ in 0..<5 {
                let (elapsed, outcome) = await timed { try await write(store) }
                #expect(isUnavailable(outcome))
                #expect(elapsed < .seconds(1), "a known-down server fails fast")
            }
            let (readTime, readOutcome) = await timed { try await store.read { tx in try tx.newestEventID() } }
            #expect(isUnavailable(readOutcome))
            #expect(readTime < .seconds(5))

            try await runBlocking { try server.start() }
            let company = try await eventually(timeout: .seconds(30)) { try await write(store) }
            #expect(try await store.read { tx in try tx.company(company.id) } == company)
        }
    }

    @Test func aFastShutdownIsSurvivedTheSameWay() async throws {
        try await withOwnServer { server, store in
            _ = try await write(store)
            try await runBlocking { try server.stop(mode: .fast) }
            let (elapsed, outcome) = await timed { try await write(store) }
            #expect(isUnavailable(outcome))
            #expect(elapsed < .seconds(5))
            try await runBlocking { try server.start() }
            _ = try await eventually(timeout: .seconds(30)) { try await write(store) }
        }
    }

    @Test func aFrozenServerIsUnavailableWithinFiveSecondsThenFailsFast() async throws {
        try await withOwnServer { server, store in
            _ = try await write(store)
            try await runBlocking { try server.freeze() }
            do {
                let (elapsed, outcome) = await timed { try await write(store) }
                #expect(isUnavailable(outcome), "\(outcome)")
                // The call's budget is 4.5 s; the rest is room for the test to get a thread back
                // on a loaded 2-core machine (a 0.5 s margin once proved too little for Redis).
                #expect(elapsed < .seconds(6), "\(elapsed)")
                let (next, nextOutcome) = await timed { try await write(store) }
                #expect(isUnavailable(nextOutcome))
                // Inside the 200 ms backoff the store refuses at once. A test that comes back later
                // is let through as a probe, which waits out the 2 s connect timeout: still bounded.
                if "\(nextOutcome)".contains("next try in") {
                    #expect(next < .seconds(1), "a known-down server fails fast")
                } else {
                    #expect(next < .seconds(3), "a probe waits at most the connect timeout")
                }
            }
            try await runBlocking { try server.thaw() }
            _ = try await eventually(timeout: .seconds(15)) { try await write(store) }
        }
    }

    @Test func aTerminatedConnectionIsReplacedWithoutFailingTheCall() async throws {
        try await withOwnServer { server, store in
            _ = try await write(store)
            let killed = try await runBlocking {
                try server.psql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'waybill'")
            }
            #expect(Int(killed) ?? 0 >= 1)
            // Each worker finds its connection broken before COMMIT, reconnects and reruns the closure.
            for _ in 0..<8 { _ = try await write(store) }
        }
    }
}

extension PostgresOutageTests {
    @Test func aKilledServerIsUnavailableAndTheStoreRecoversAfterItsRestart() async throws {
        try await withOwnServer { server, store in
            _ = try await write(store)
            try await runBlocking { try server.kill() }
            let (elapsed, outcome) = await timed { try await write(store) }
            #expect(isUnavailable(outcome), "\(outcome)")
            #expect(elapsed < .seconds(5))
            try await runBlocking {
                // The kernel may take a moment to reap the killed processes before the port is free.
                var lastError: (any Error)?
                for _ in 0..<20 {
                    do {
                        return try server.start()
                    } catch {
                        lastError = error
                        Thread.sleep(forTimeInterval: 0.25)
                    }
                }
                throw lastError!
            }
            _ = try await eventually(timeout: .seconds(30)) { try await write(store) }
        }
    }
}

/// Two bounds of the pipelined transaction that only a server frozen mid-call shows.
extension PostgresOutageTests {
    /// A closure that runs no statement but appends sends BEGIN, the append and COMMIT in one
    /// pipeline. If not even the BEGIN of it is answered, the server is taken for gone, as for any
    /// BEGIN that times out (taken for busy, every later call would wait out its own deadline).
    @Test func anUnansweredBeginSentWithTheCommitCountsTheServerAsUnreachable() async throws {
        let server = try await runBlocking { try PostgresServer() }
        let result = await outcome {
            let url = try await runBlocking { try server.createDatabase() }
            let store = try await openStore(url)
            let order = try await seedOrder(store)
            try await runBlocking { store.close() }
            let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-frozen")
            let (unavailable, down) = try await runBlocking {
                let session = PostgresSession(settings: settings.forPool, health: PostgresHealth())
                defer { session.close() }
                let runner = PostgresTransactionRunner(kind: .write, clock: { Date() })
                // The connection is open and answering before the server freezes.
                _ = try runner.run({ tx in try tx.execute("SELECT 1") }, on: session, deadline: .now + .seconds(5)).get()
                try server.freeze()
                defer { try? server.thaw() }
                let result = runner.run(
                    { tx in _ = try tx.appendAtCommit([createdEvent(order)]) }, on: session, deadline: .now + .seconds(2))
                return (isUnavailable(result), session.health.isDown)
            }
            #expect(unavailable)
            #expect(down, "the frozen server was taken for busy, not unreachable")
        }
        _ = try? await runBlocking { server.remove() }
        try result.get()
    }

    /// A closure that throws after its statements ran is rolled back; if the server stops
    /// answering in between, the ROLLBACK waits at most a second (then the connection is dropped,
    /// which rolls back as well), and the caller gets the closure's own error, not a hang for the
    /// call's whole budget.
    @Test func aRollbackTheServerDoesNotAnswerEndsWithinASecond() async throws {
        struct Refused: Error {}
        let inserted = Mutex<CompanyID?>(nil)
        try await withOwnServer { server, store in
            _ = try await write(store)
            let (elapsed, outcome) = await timed {
                try await store.write { tx in
                    let company = try tx.insertCompany(name: "Globex")
                    inserted.withLock { $0 = company.id }
                    try server.freeze()
                    throw Refused()
                }
            }
            try await runBlocking { try server.thaw() }
            if case .failure(let error) = outcome {
                #expect(error is Refused, "\(error)")
            } else {
                Issue.record("the closure's error was lost: \(outcome)")
            }
            // The bound is 1 s; the rest is room for a loaded runner. Unbounded, the ROLLBACK
            // waited out the call's 4.5 s budget.
            #expect(elapsed < .seconds(3), "\(elapsed)")
            let id = try #require(inserted.withLock { $0 })
            let company = try await eventually(timeout: .seconds(15)) {
                try await store.read { tx in try tx.company(id) }
            }
            #expect(company == nil, "the refused write was committed")
        }
    }
}
