import Foundation
import Testing
import WaybillDomain
import WaybillSQLite
import WaybillStorage
import WaybillStoreTesting
import WaybillTesting

@testable import WaybillAPI

/// A dispatcher token's last use (`--token-idle-hours`), at the authenticator, on a real SQLite store.
@Suite(.timeLimit(.minutes(1)))
struct TokenIdleTests {
    /// An authenticator with a dispatcher idle limit of `idleLimit`, over a fresh store (read and
    /// written through a `HeldStore`) seeded with a company and its dispatcher, on a stepped clock.
    static func withAuthenticator(
        idleLimit: Duration, drivers: Int = 0,
        _ body: (Authenticator, HeldStore, Seeder.Result, SteppedClock) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-idle-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let real = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { real.close() }
        let seed = try await Seeder(store: real, passwordIterations: 1_000).seed(
            .init(companyName: "Acme", drivers: drivers, ordersPerDriver: 0))
        let store = HeldStore(real), clock = SteppedClock(), pool = KeyStretchingPool(threads: 1)
        defer { pool.stop() }
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: 1_000, pool: pool), pool: pool,
            throttle: LoginThrottle(store: real, clock: clock), tokenIdleLimit: idleLimit)
        try await body(auth, store, seed, clock)
    }

    /// The requests of a page load miss the token cache together: they write the token's use once,
    /// not once each (a review found a write per request).
    @Test func lookupsOfOneTokenAtOnceWriteItsUseOnce() async throws {
        try await Self.withAuthenticator(idleLimit: .seconds(3_600)) { auth, store, seed, clock in
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
    }

    /// A limit shorter than the 5 minutes between writes of a token's use: the use is written every
    /// quarter of the limit, or an active user was refused once the limit passed since the login
    /// (`ServerConfiguration.tokenIdleLimit` takes any duration; the flag, whole hours).
    @Test func aShortLimitStillKeepsAnActiveTokenWorking() async throws {
        try await Self.withAuthenticator(idleLimit: .seconds(120)) { auth, _, seed, clock in
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

    /// A driver's token in use keeps its place among the user's newest tokens: its use is written
    /// too (drivers have no idle limit), so a script's hundred logins over the day, each a new
    /// token, evict the script's own old tokens, not the phone's (a review, 2026-12-07: only a
    /// dispatcher's use was written, and a driver's tokens went by age).
    @Test func aDriversTokenInUseOutlivesAHundredLoginsOfTheSameDriver() async throws {
        try await Self.withAuthenticator(idleLimit: .seconds(3_600), drivers: 1) { auth, store, seed, clock in
            let driver = seed.drivers[0]
            let phone = driver.token
            for login in 1...(maxTokensPerUser + 5) {
                clock.advance(by: 60)
                _ = try await auth.login(email: driver.email, password: driver.password, from: "127.0.0.1")
                if login % 5 == 0 {  // the phone, in use all along
                    #expect(try await auth.credential(forToken: phone) != nil, "login \(login)")
                    #expect(await eventually { auth.touchesInFlight == 0 })
                }
            }
            let hash = Secret(phone).hash, now = clock.now()
            let stored = try await store.read { tx in try tx.user(tokenHash: hash, now: now) }
            #expect(stored?.user.id.rawValue == driver.id, "the phone's token is still there")
        }
    }
}
