import Foundation
import Testing
import WaybillDomain

@testable import WaybillAPI

/// Each user's API requests on a node: a token bucket (`UserRequestLimiter`), answered 429 past it
/// (docs/HARDENING.md, "A user's request rate").
@Suite(.timeLimit(.minutes(1)))
struct UserRequestLimitTests {
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aBurstThenTheRateThenRefused() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 2, burst: 3)))
        let user = UserID(7)
        for n in 0..<3 { #expect(limiter.admit(user, now: Self.t0) == .allowed, "request \(n) of the burst") }
        #expect(limiter.admit(user, now: Self.t0) == .limited(retryAfter: 1))
        // Half a second at 2/s puts one token back, and only one.
        #expect(limiter.admit(user, now: Self.t0.addingTimeInterval(0.5)) == .allowed)
        #expect(limiter.admit(user, now: Self.t0.addingTimeInterval(0.5)) == .limited(retryAfter: 1))
        // A long pause refills the burst, never more than the burst.
        let later = Self.t0.addingTimeInterval(3_600)
        for n in 0..<3 { #expect(limiter.admit(user, now: later) == .allowed, "request \(n) after a pause") }
        #expect(limiter.admit(user, now: later) != .allowed)
    }

    @Test func retryAfterIsWhenATokenIsBackInWholeSeconds() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 1, burst: 1)))
        #expect(limiter.admit(UserID(1), now: Self.t0) == .allowed)
        #expect(limiter.admit(UserID(1), now: Self.t0) == .limited(retryAfter: 1))
        // A quarter of a token back: three quarters of a second to wait, rounded up, never 0.
        #expect(limiter.admit(UserID(1), now: Self.t0.addingTimeInterval(0.25)) == .limited(retryAfter: 1))
        #expect(limiter.admit(UserID(1), now: Self.t0.addingTimeInterval(1.0)) == .allowed)
    }

    @Test func usersHaveBucketsOfTheirOwn() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 1, burst: 2)))
        for _ in 0..<2 { #expect(limiter.admit(UserID(1), now: Self.t0) == .allowed) }
        #expect(limiter.admit(UserID(1), now: Self.t0) != .allowed)
        for _ in 0..<2 { #expect(limiter.admit(UserID(2), now: Self.t0) == .allowed) }
    }

    @Test func aClockSetBackNeitherDrainsNorFreezesABucket() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 1, burst: 1)))
        #expect(limiter.admit(UserID(1), now: Self.t0) == .allowed)
        let back = Self.t0.addingTimeInterval(-3_600)
        #expect(limiter.admit(UserID(1), now: back) == .limited(retryAfter: 1))
        // From the new time on it refills as usual, not only once the clock is back at t0.
        #expect(limiter.admit(UserID(1), now: back.addingTimeInterval(1)) == .allowed)
    }

    @Test func zeroPerSecondIsNoLimit() {
        #expect(UserRequestLimiter(.init(perSecond: 0, burst: 200)) == nil)
    }

    /// Memory stays bounded however many users ask: full buckets are dropped to make room, and a user
    /// past the bound while all are draining goes untracked instead of growing the table.
    @Test func theTableIsBounded() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 1, burst: 2), maxTracked: 100))
        for n in 0..<100 { #expect(limiter.admit(UserID(Int64(n + 1)), now: Self.t0) == .allowed) }
        #expect(limiter.trackedCount == 100)
        #expect(limiter.admit(UserID(1_000), now: Self.t0) == .allowed)
        #expect(limiter.trackedCount == 100, "a user past the bound is not tracked while every bucket drains")
        // A second later every bucket is full again: they carry nothing, and make room.
        #expect(limiter.admit(UserID(1_001), now: Self.t0.addingTimeInterval(1)) == .allowed)
        #expect(limiter.trackedCount == 1)
        // Full again (all draining): a user already tracked keeps their state, a new one is not tracked.
        for n in 0..<99 { _ = limiter.admit(UserID(5_000 + Int64(n)), now: Self.t0.addingTimeInterval(1)) }
        #expect(limiter.trackedCount == 100)
        #expect(limiter.admit(UserID(1_001), now: Self.t0.addingTimeInterval(1)) == .allowed)
        #expect(limiter.admit(UserID(1_001), now: Self.t0.addingTimeInterval(1)) != .allowed, "its bucket went on")
        #expect(limiter.admit(UserID(9_999), now: Self.t0.addingTimeInterval(1.5)) == .allowed)
        #expect(limiter.trackedCount == 100)
    }

    /// A user past the bound costs a look-up, not a walk of the whole table: a full table is swept
    /// at most once a second (found by a review).
    @Test func aFullTableIsSweptAtMostOnceASecond() throws {
        let limiter = try #require(UserRequestLimiter(.init(perSecond: 4, burst: 2), maxTracked: 100))
        for n in 0..<100 { _ = limiter.admit(UserID(Int64(n + 1)), now: Self.t0) }
        #expect(limiter.admit(UserID(1_000), now: Self.t0) == .allowed)  // swept, nothing was full
        // Half a second later every bucket is full again, but the last sweep was too recent.
        #expect(limiter.admit(UserID(1_001), now: Self.t0.addingTimeInterval(0.5)) == .allowed)
        #expect(limiter.trackedCount == 100)
        #expect(limiter.admit(UserID(1_002), now: Self.t0.addingTimeInterval(1)) == .allowed)
        #expect(limiter.trackedCount == 1)
    }

    /// End to end: past the burst, 429 `rate_limited` with `Retry-After`, counted in `/metrics`,
    /// before the handler runs (the write is not made); other users, logins and requests without a
    /// token are not counted; the same user gets in again once the clock has moved.
    @Test func theServerAnswers429PastAUsersRate() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.userRequestsPerSecond = 1; $0.userRequestBurst = 3 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let dispatcher = seed.dispatcherToken, driver = seed.drivers[0].token
            let order = try #require(seed.drivers[0].orderIDs?.first)
            for n in 0..<3 { #expect(try await server.request("GET", "/api/me", token: dispatcher).status == 200, "request \(n)") }
            let refused = try await server.request("PATCH", "/api/orders/\(order)/", token: dispatcher, json: ["notes": "past the rate"])
            #expect(refused.status == 429)
            #expect(refused.errorCode == "rate_limited")
            #expect(refused.headers["retry-after"] == "1", "\(refused.headers)")
            // The driver's own bucket is full; a login and a request without a token are not the user's.
            #expect(try await server.request("GET", "/api/me", token: driver).status == 200)
            #expect(try await server.request("GET", "/api/me").status == 401)
            let login = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
            #expect(login.status == 200)
            let fresh = try #require(login.object.string("token"))
            #expect(try await server.request("GET", "/api/me", token: fresh).status == 429, "the user, not the token, is limited")
            clock.advance(by: 1)
            let detail = try await server.request("GET", "/api/orders/\(order)/", token: dispatcher)
            #expect(detail.status == 200)
            #expect(detail.object.string("notes") != "past the rate", "the refused write was never made")
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"user_requests\"} 2\n"), "\(metrics)")
            #expect(server.logs.all.contains { $0.contains("status=429") && $0.contains("user_id=\(seed.dispatcher.id)") })
        }
    }

    /// Logging out is never refused for the rate: a script flooding with a leaked token keeps the
    /// user's bucket empty, and the logout is what revokes that token (found by a review).
    @Test func aUserOverTheRateCanStillLogOut() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.userRequestsPerSecond = 1; $0.userRequestBurst = 2 }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let token = seed.dispatcherToken
            while try await server.request("GET", "/api/me", token: token).status == 200 {}
            #expect(try await server.request("GET", "/api/me", token: token).status == 429)
            #expect(try await server.request("POST", "/api/auth/logout", token: token).status == 204)
            clock.advance(by: 10)
            #expect(try await server.request("GET", "/api/me", token: token).status == 401, "the logout revoked the token")
        }
    }

    /// A WebSocket opened with `?token=` is one of the user's requests: past the rate it is closed
    /// with 1013 (the apps reconnect with backoff), another user's is not; a ticket's socket is not
    /// charged again (the ticket's request was).
    @Test func aSocketOpenedWithATokenPastTheRateIsClosedWith1013() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.userRequestsPerSecond = 1; $0.userRequestBurst = 3 }) { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let driver = seed.drivers[0].token
            let ticket = try #require(try await server.request("POST", "/api/ws-ticket", token: driver).object.string("ticket"))
            let (first, _) = try await server.connectedSocket(token: driver)
            #expect(try await server.request("GET", "/api/me", token: driver).status == 200)  // the burst's third
            let refused = try await server.socket(token: driver)
            #expect(await refused.closed() != nil)  // an lws client reads 1013 as 1002: the server's log says
            #expect(await server.eventually {
                server.logs.contains("over their request rate") && SocketBoundsTests.closeLogged(server, code: 1013)
            })
            let byTicket = try await TestSocket.open(port: server.port, query: "ticket=\(ticket)")
            #expect((await byTicket.next())?["type"] as? String == "connected", "a ticket's socket is not charged again")
            let (other, _) = try await server.connectedSocket(token: seed.drivers[1].token)
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"user_requests\"} 1\n"), "\(metrics)")
            for socket in [first, byTicket, other] { await socket.close() }
        }
    }

    @Test func zeroTurnsTheLimitOff() async throws {
        try await TestServer.withRunning(configure: { $0.userRequestsPerSecond = 0; $0.userRequestBurst = 1 }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            for n in 0..<20 { #expect(try await server.request("GET", "/api/me", token: seed.dispatcherToken).status == 200, "\(n)") }
        }
    }
}
