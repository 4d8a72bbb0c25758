import Foundation
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillSQLite
import WaybillStoreTesting

@testable import WaybillAPI

/// The steps of an order write taken without a task (`RequestContext.actorNow`,
/// `APIResponder.respondNow`): they name the user only from the token cache, and a request
/// that goes on on a task afterwards is charged to its user's rate once.
@Suite(.timeLimit(.minutes(1)))
struct ImmediateAnswerTests {
    /// An authenticator allowing one request per user (no refill: its clock stands still), over a
    /// fresh store seeded with a company and its dispatcher.
    private static func withAuthenticator(_ body: (Authenticator, Seeder.Result) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-now-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        defer { store.close() }
        let seed = try await Seeder(store: store, passwordIterations: 1_000).seed(
            .init(companyName: "Acme", drivers: 0, ordersPerDriver: 0))
        let clock = SteppedClock(), pool = KeyStretchingPool(threads: 1)
        defer { pool.stop() }
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: 1_000, pool: pool), pool: pool,
            throttle: LoginThrottle(store: store, clock: clock),
            requestLimiter: UserRequestLimiter(.init(perSecond: 1, burst: 1)), elapsed: clock)
        try await body(auth, seed)
    }

    private static func context(_ auth: Authenticator, token: String) -> RequestContext {
        let request = HTTPRequest(
            method: "PATCH", path: "/api/orders/1/", query: [], headers: HTTPHeaders([("Authorization", "Bearer \(token)")]),
            body: [], remoteAddress: "127.0.0.1")
        return RequestContext(parameters: PathParameters(), request: request, authenticator: auth)
    }

    @Test func aTokenTheCacheDoesNotHoldNamesNoUserAndTakesNothing() async throws {
        try await Self.withAuthenticator { auth, seed in
            #expect(try Self.context(auth, token: seed.dispatcherToken).actorNow() == nil, "a miss: the store must answer")
            // Nothing was taken: the user's one allowed request is still there for another request.
            let actor = try await Self.context(auth, token: seed.dispatcherToken).requireActor()
            #expect(actor.userID == UserID(seed.dispatcher.id) && actor.isDispatcher)
        }
    }

    @Test func aRequestThatGoesOnOnATaskIsChargedOnce() async throws {
        try await Self.withAuthenticator { auth, seed in
            _ = try await auth.credential(forToken: seed.dispatcherToken)  // into the cache
            let context = Self.context(auth, token: seed.dispatcherToken)
            let now = try #require(try context.actorNow())
            #expect(now.userID == UserID(seed.dispatcher.id))
            // The write could not commit at once: the handler starts over on a task, same context.
            let later = try await context.requireActor()
            #expect(later == now, "admitted once: a second charge would be over the one allowed")
            // Another request of the same user is over the rate.
            let next = Self.context(auth, token: seed.dispatcherToken)
            #expect(throws: APIError.self) { try next.actorNow() }
        }
    }
}
