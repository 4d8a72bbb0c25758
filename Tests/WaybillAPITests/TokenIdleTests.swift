import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillSQLite
import WaybillStorage
import WaybillTesting

@testable import WaybillAPI

/// A dispatcher token's last use (`--token-idle-hours`), at the authenticator, on a real SQLite store.
@Suite(.timeLimit(.minutes(1)))
struct TokenIdleTests {
    /// Passes calls through to `store`; holds reads while `holdingReads`, and counts writes.
    final class HeldStore: OrderStore {
        private let store: any OrderStore
        private let state = Mutex<(holding: Bool, waiting: [CheckedContinuation<Void, Never>], writes: Int)>((false, [], 0))
        init(_ store: any OrderStore) { self.store = store }
        func holdReads() { state.withLock { $0.holding = true } }
        func releaseReads() {
            let waiting = state.withLock { state in
                state.holding = false
                defer { state.waiting = [] }
                return state.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
        var heldReads: Int { state.withLock { $0.waiting.count } }
        var writes: Int { state.withLock { $0.writes } }

        func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
            await withCheckedContinuation { continuation in
                let held = state.withLock { state -> Bool in
                    guard state.holding else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                if !held { continuation.resume() }
            }
            return try await store.read(body)
        }
        func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
            state.withLock { $0.writes += 1 }
            return try await store.write(body)
        }
        func close() {}
        func lease(_ name: String) -> any Lease { store.lease(name) }
    }

    /// The requests of a page load miss the token cache together: they write the token's use once,
    /// not once each (a review found a write per request).
    @Test func lookupsOfOneTokenAtOnceWriteItsUseOnce() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-idle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { real.close() }
        let seed = try await Seeder(store: real, passwordIterations: 1_000).seed(
            .init(companyName: "Acme", drivers: 0, ordersPerDriver: 0))
        let store = HeldStore(real), clock = SteppedClock(), pool = KeyStretchingPool(threads: 1)
        defer { pool.stop() }
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: 1_000, pool: pool), pool: pool,
            throttle: LoginThrottle(store: real, clock: clock), tokenIdleLimit: .seconds(3_600))
        clock.advance(by: 600)  // the use stored at the seed is 10 minutes old: due to be written again
        store.holdReads()
        let lookups = 5
        let found = Task {
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<lookups { group.addTask { (try? await auth.credential(forToken: seed.dispatcherToken)) != nil } }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
        }
        #expect(await eventually { store.heldReads == lookups }, "every lookup missed the cache")
        store.releaseReads()
        #expect(await found.value == lookups)
        #expect(await eventually { auth.touchesInFlight == 0 })
        #expect(store.writes == 1, "one write for the five")
    }
}
