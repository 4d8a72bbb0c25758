import Testing
import WaybillStorage

/// `OrderStore.health` on every backend: a store that works reports no problem, so `/readyz`
/// passes (SQLite's failing-checkpoint case is in WaybillSQLiteTests: it needs a test seam).
@Suite struct StoreHealthConformanceTests {
    @Test(arguments: Backend.allCases) func aWorkingStoreReportsNoProblem(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            _ = try await store.write { tx in try tx.insertCompany(name: "Acme") }
            #expect(store.health.isHealthy)
            #expect(store.health.problems.isEmpty)
            #expect(store.health.checkpointFailures == 0)
        }
    }
}
