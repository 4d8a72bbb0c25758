import Foundation
import Testing
import WaybillPostgres
import WaybillStorage
import WaybillTesting

/// `isHeld` is read with `eventually` where a test expects it true: a PostgreSQL lease reports
/// false once its heartbeat has not been confirmed for 2.5 s, and a stalled runner can hold the
/// heartbeat that long; the next confirmation makes it true again. Where a test expects false, one
/// read is enough: a stall cannot make a lease that is not held look held.
@Suite(.timeLimit(.minutes(1))) struct LeaseConformanceTests {
    /// Two leases of one name as two nodes would hold them: from two stores on one PostgreSQL
    /// database; from one SQLite store (an embedded store serves exactly one process).
    private func withTwoNodes(
        _ backend: Backend, _ body: (any Lease, any Lease) async throws -> Void
    ) async throws {
        switch backend {
        case .sqlite:
            try await withStore(backend) { store in try await body(store.lease("relay"), store.lease("relay")) }
        case .postgres:
            let url = try await runBlocking {
                try PostgresServer.shared().createDatabase(template: MigratedTemplate.database.get())
            }
            let first = try await postgresStore(url: url)
            let second = try await postgresStore(url: url)
            let result = await Result { try await body(first.lease("relay"), second.lease("relay")) }
            _ = try? await runBlocking {  // off the cooperative pool (`withStore`)
                first.close()
                second.close()
            }
            _ = try? await runBlocking { try PostgresServer.shared().dropDatabase(url) }
            try result.get()
        }
    }

    @Test(arguments: Backend.allCases) func oneHolderAtATimeAndReleaseHandsOver(_ backend: Backend) async throws {
        try await withTwoNodes(backend) { first, second in
            #expect(await first.acquire())
            #expect(await eventually { first.isHeld })
            // The second waits while the first holds it: its acquire returns only after the release
            // began (a fixed pause alone could not tell a slow acquire from a wait).
            let releasing = Moment()
            let waiting = Task { (await second.acquire(), releasing.hasCome) }
            try await Task.sleep(for: .milliseconds(700))
            #expect(!second.isHeld, "two holders at once")
            releasing.come()
            await first.release()
            #expect(!first.isHeld)
            let (acquired, afterRelease) = await waiting.value
            #expect(acquired)
            #expect(afterRelease, "the second got the lease while the first held it")
            #expect(await eventually { second.isHeld })
            await second.release()
        }
    }

    @Test(arguments: Backend.allCases) func acquireReturnsFalseWhenCancelled(_ backend: Backend) async throws {
        try await withTwoNodes(backend) { first, second in
            #expect(await first.acquire())
            let waiting = Task { await second.acquire() }
            try await Task.sleep(for: .milliseconds(300))
            waiting.cancel()
            #expect(await waiting.value == false)
            #expect(!second.isHeld)
            #expect(await eventually { first.isHeld })
            await first.release()
        }
    }

    @Test(arguments: Backend.allCases) func otherNamesAreIndependent(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let relay = store.lease("relay"), pruner = store.lease("pruner")
            #expect(await relay.acquire())
            #expect(await pruner.acquire())
            #expect(await eventually { relay.isHeld && pruner.isHeld })
            await relay.release()
            await pruner.release()
        }
    }
}
