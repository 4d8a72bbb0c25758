import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

@Suite(.timeLimit(.minutes(1))) struct PostgresOpeningTests {
    private func openingError(_ url: String) async -> StoreError? {
        do {
            let store = try await openStore(url)
            store.close()
            return nil
        } catch {
            return error as? StoreError
        }
    }

    @Test func aMalformedURLIsUnavailableWithOneClearLine() async {
        for url in [
            "mysql://u@127.0.0.1/db", "postgresql://127.0.0.1:5432/db", "postgresql://u@127.0.0.1:5432/",
            "not a url", "postgresql://u@127.0.0.1:99999/db",
        ] {
            let error = await openingError(url)
            guard case .unavailable(let why)? = error else {
                Issue.record("\(url): expected unavailable, got \(String(describing: error))")
                continue
            }
            #expect(why.hasPrefix("invalid PostgreSQL URL: "), "\(why)")
            #expect(!why.contains("\n"))
        }
    }

    @Test func aClosedPortIsUnavailableAtOnce() async throws {
        let closed = try RefusingPort()  // held: nothing else listens there meanwhile
        defer { closed.close() }
        let port = closed.port
        // Timed on the opening thread (as below): the 3 s bound is about the store, not about how
        // soon a busy runner's cooperative pool resumes the test (3.5–3.7 s twice, under load).
        let (elapsed, outcome) = try await runBlocking {
            let start = ContinuousClock.now
            let outcome = Result {
                try PostgresOrderStore(url: "postgresql://waybill:secret@127.0.0.1:\(port)/waybill")
            }
            return (start.duration(to: .now), outcome.map { _ in () })
        }
        guard case .failure(let error) = outcome, case .unavailable(let why)? = error as? StoreError else {
            Issue.record("expected unavailable, got \(outcome)")
            return
        }
        #expect(why.contains("127.0.0.1:\(port)/waybill"), "\(why)")
        #expect(why.lowercased().contains("refused"), "\(why)")
        #expect(!why.contains("secret"), "the password never appears in errors")
        #expect(!why.contains("\n"))
        #expect(elapsed < .seconds(3))
    }

    /// The store's `connectTimeout` bounds the connect at open: a port that completes TCP but never
    /// answers (a frozen host) fails the open after it, not after the default 2 s. Timed on the
    /// opening thread: a busy runner's cooperative pool took seconds to resume the awaiting test.
    @Test func aConnectThatIsNotAnsweredEndsAtTheStoresConnectTimeout() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let (elapsed, outcome) = try await runBlocking {
            let start = ContinuousClock.now
            let outcome = Result {
                try PostgresOrderStore(
                    url: "postgresql://waybill@127.0.0.1:\(silent.port)/waybill", connectTimeout: .milliseconds(300))
            }
            return (start.duration(to: .now), outcome.map { _ in () })
        }
        guard case .failure(let error) = outcome, case .unavailable(let why)? = error as? StoreError else {
            Issue.record("expected unavailable, got \(outcome)")
            return
        }
        #expect(why.contains("timeout expired while connecting"), "\(why)")
        #expect(elapsed >= .milliseconds(300))
        #expect(elapsed < .milliseconds(1500), "the 300 ms bound, not the default 2 s")
    }

    @Test func aConnectTimeoutThatIsNotPositiveIsRefusedAtOpen() async {
        for timeout in [Duration.zero, .milliseconds(-5)] {
            do {
                _ = try PostgresOrderStore(url: "postgresql://waybill@127.0.0.1:1/waybill", connectTimeout: timeout)
                Issue.record("\(timeout): opened")
            } catch {
                guard case .unavailable(let why)? = error as? StoreError else {
                    Issue.record("\(timeout): expected unavailable, got \(error)")
                    continue
                }
                #expect(why.hasPrefix("invalid PostgreSQL connect timeout"), "\(why)")
            }
        }
    }

    /// And the connect a call's worker makes lazily, after the open, here given more than the
    /// default 2 s: a call meeting a server frozen for 3 s connects once it thaws, and succeeds.
    /// (With the default it would fail as unavailable after 2 s.) What tests on a busy runner rely
    /// on: WaybillStoreConformanceTests opens its stores with 10 s. The thaw runs on a thread of
    /// its own: a busy runner's cooperative pool took seconds to resume a task.
    @Test func aCallsLazyConnectWaitsForTheStoresConnectTimeout() async throws {
        let server = try await runBlocking { try PostgresServer() }
        let result = await outcome {
            let url = try await runBlocking { try server.createDatabase() }
            let store = try await runBlocking {
                try PostgresOrderStore(
                    url: url, writerCount: 1, readerCount: 1, callBudget: .seconds(30), connectTimeout: .seconds(15))
            }
            try await runBlocking { try server.freeze() }
            Thread.detachNewThread {
                Thread.sleep(forTimeInterval: 3)
                try? server.thaw()
            }
            let written = await outcome { try await store.write { tx in try tx.insertCompany(name: "Acme") } }
            _ = try? await runBlocking { store.close() }
            #expect(try written.get().name == "Acme")
        }
        _ = try? await runBlocking { server.remove() }
        try result.get()
    }

    @Test func anUnknownDatabaseIsUnavailable() async throws {
        let server = try await runBlocking { try PostgresServer.shared() }
        let error = await openingError(server.url(database: "no_such_database"))
        guard case .unavailable(let why)? = error else {
            Issue.record("expected unavailable, got \(String(describing: error))")
            return
        }
        #expect(why.contains("no_such_database"), "\(why)")
    }

    @Test func aClosedStoreIsUnavailable() async throws {
        let store = try await openStore(try await freshDatabase())
        store.close()
        store.close()
        await #expect(throws: StoreError.unavailable("the store is closed")) {
            try await store.read { tx in try tx.newestEventID() }
        }
        await #expect(throws: StoreError.unavailable("the store is closed")) {
            try await store.write { tx in try tx.insertCompany(name: "Late") }
        }
    }

    @Test func aConflictNamesTheConstraintButNotTheValue() async throws {
        let store = try await openStore(try await freshDatabase())
        defer { store.close() }
        _ = try await store.write { tx in
            try tx.insertUser(
                companyID: nil, role: .driver, email: "secret.person@x.test", name: "A", passwordHash: "h")
        }
        let error = await #expect(throws: StoreError.self) {
            try await store.write { tx in
                try tx.insertUser(
                    companyID: nil, role: .driver, email: "Secret.Person@x.test", name: "B", passwordHash: "h")
            }
        }
        #expect(error == .conflict("unique constraint users_email_unique"))
        #expect(!(error?.description.lowercased().contains("secret.person") ?? true))
    }

    @Test func textWithANULIsRefusedNotCut() async throws {
        let store = try await openStore(try await freshDatabase())
        defer { store.close() }
        let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }
        let order = Order(companyID: company.id, number: "1", title: "a\u{0}b", createdAt: t0, updatedAt: t0)
        let error = await #expect(throws: StoreError.self) { try await store.write { tx in try tx.insertOrder(order) } }
        guard case .failure? = error else {
            Issue.record("expected a failure, got \(String(describing: error))")
            return
        }
        #expect(try await store.read { tx in try tx.orderPage(in: company.id, OrderQuery(limit: 500)).rows } == [])
    }

    @Test func aHandleUsedAfterItsClosureIsRefused() async throws {
        final class Leak: @unchecked Sendable { var reader: (any StoreReader)? }
        let store = try await openStore(try await freshDatabase())
        defer { store.close() }
        let leak = Leak()
        try await store.read { tx in leak.reader = tx }
        #expect(throws: StoreError.self) { try leak.reader?.newestEventID() }
    }
}
