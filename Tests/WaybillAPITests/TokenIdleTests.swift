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
    /// Passes calls through to `store`; holds reads (or writes) while told to, and counts writes.
    final class HeldStore: OrderStore {
        private struct Gate {
            var holding = false
            var waiting: [CheckedContinuation<Void, Never>] = []
        }
        private let store: any OrderStore
        private let reads = Mutex(Gate()), writeGate = Mutex(Gate()), writeCount = Atomic<Int>(0)
        init(_ store: any OrderStore) { self.store = store }
        func holdReads() { reads.withLock { $0.holding = true } }
        func releaseReads() { Self.release(reads) }
        func holdWrites() { writeGate.withLock { $0.holding = true } }
        func releaseWrites() { Self.release(writeGate) }
        var heldReads: Int { reads.withLock { $0.waiting.count } }
        var writes: Int { writeCount.load(ordering: .relaxed) }

        private static func release(_ gate: borrowing Mutex<Gate>) {
            let waiting = gate.withLock { gate in
                gate.holding = false
                defer { gate.waiting = [] }
                return gate.waiting
            }
            for continuation in waiting { continuation.resume() }
        }
        private static func pass(_ gate: borrowing Mutex<Gate>) async {
            await withCheckedContinuation { continuation in
                let held = gate.withLock { gate -> Bool in
                    guard gate.holding else { return false }
                    gate.waiting.append(continuation)
                    return true
                }
                if !held { continuation.resume() }
            }
        }

        func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
            await Self.pass(reads)
            return try await store.read(body)
        }
        func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
            writeCount.add(1, ordering: .relaxed)
            await Self.pass(writeGate)
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
        store.holdWrites()  // the first touch stays in flight while every lookup answers
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
        store.releaseWrites()
        #expect(await eventually { auth.touchesInFlight == 0 })
        #expect(store.writes == 1, "one write for the five")
    }

    /// A limit shorter than the 5 minutes between writes of a token's use: the use is written every
    /// quarter of the limit, or an active user was refused once the limit passed since the login
    /// (`ServerConfiguration.tokenIdleLimit` takes any duration; the flag, whole hours).
    @Test func aShortLimitStillKeepsAnActiveTokenWorking() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-idle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { store.close() }
        let clock = SteppedClock(), pool = KeyStretchingPool(threads: 1)
        defer { pool.stop() }
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: 1_000, pool: pool), pool: pool,
            throttle: LoginThrottle(store: store, clock: clock), tokenIdleLimit: .seconds(120))
        let seed = try await Seeder(store: store, passwordIterations: 1_000).seed(
            .init(companyName: "Acme", drivers: 0, ordersPerDriver: 0))
        let login = try await auth.login(email: seed.dispatcher.email, password: seed.dispatcher.password, from: "127.0.0.1")
        let token = login.token.value
        for step in 1...4 {  // a use every 40 s for 160 s: more than the limit since the login
            clock.advance(by: 40)
            #expect(try await auth.credential(forToken: token) != nil, "use \(step), \(40 * step) s after the login")
            #expect(await eventually { auth.touchesInFlight == 0 })
        }
        clock.advance(by: 121)
        #expect(try await auth.credential(forToken: token) == nil, "then 121 s unused")
    }
}
