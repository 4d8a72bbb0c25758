import Foundation
import Synchronization
import Testing
import WaybillAPI
@testable import WaybillSQLite

@Suite(.timeLimit(.minutes(1)))
struct AuthAPITests {
    @Test func loginReturnsATokenThatAuthenticates() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let login = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
            #expect(login.status == 200)
            let token = try #require(login.object.string("token"))
            let user = try #require(login.object["user"] as? [String: Any])
            #expect(user.string("role") == "dispatcher")
            #expect(user.int("company_id") == seed.companyID)
            #expect(user["password_hash"] == nil)
            // A token must not land in a client's disk cache; ordinary answers only revalidate.
            #expect(login.headers["cache-control"] == "no-store")
            let me = try await server.request("GET", "/api/me", token: token)
            #expect(me.status == 200)
            #expect(me.headers["cache-control"] == "no-cache, private")
            #expect(me.object.int("id") == seed.dispatcher.id)
            #expect(me.object.string("role") == "dispatcher")
        }
    }

    /// A bearer token that cannot be one is 401 without a store read: with the store closed it is
    /// still 401, while a well-formed unknown token needs the store (503). Counted as
    /// `bound="malformed_token"`.
    @Test func aMalformedTokenNeverReachesTheStore() async throws {
        try await TestServer.withRunning { server in
            server.store.close()
            for garbage in ["undefined", "' OR 1=1 --", String(repeating: "A", count: 42), String(repeating: "A", count: 44), String(repeating: "A", count: 42) + "="] {
                let answer = try await server.request("GET", "/api/me", token: garbage)
                #expect(answer.status == 401, "\(garbage): \(answer.status)")
                #expect(answer.errorCode == "not_authenticated")
            }
            let wellFormed = try await server.request("GET", "/api/me", token: String(repeating: "A", count: 43))
            #expect(wellFormed.status == 503, "a well-formed token is looked up: \(wellFormed.text)")
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"malformed_token\"} 5\n"), "\(metrics)")
        }
    }

    /// A login that names its role (the panel's: `dispatcher`) is refused for a user of another
    /// role before a token is made: the panel turned drivers away with a token nobody revoked.
    @Test func aLoginForAnotherRoleIsRefusedWithoutAToken() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let driver = seed.drivers[0]
            let tokensBefore = try Self.tokenCount(server)
            let refused = try await server.request(
                "POST", "/api/auth/login", json: ["email": driver.email, "password": driver.password, "role": "dispatcher"])
            #expect(refused.status == 403)
            #expect(refused.errorCode == "wrong_role")
            #expect(refused.object["token"] == nil)
            #expect(try Self.tokenCount(server) == tokensBefore, "no token was made")
            // Wrong password with a role: still 401, the role says nothing before the password.
            let wrong = try await server.request(
                "POST", "/api/auth/login", json: ["email": driver.email, "password": "nope", "role": "dispatcher"])
            #expect(wrong.status == 401)
            // The role that fits, and no role at all, log in as before.
            let dispatcher = try await server.request(
                "POST", "/api/auth/login",
                json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password, "role": "dispatcher"])
            #expect(dispatcher.status == 200 && dispatcher.object.string("token") != nil)
            let asDriver = try await server.request(
                "POST", "/api/auth/login", json: ["email": driver.email, "password": driver.password, "role": "driver"])
            #expect(asDriver.status == 200)
            let plain = try await server.request("POST", "/api/auth/login", json: ["email": driver.email, "password": driver.password])
            #expect(plain.status == 200)
            #expect(try Self.tokenCount(server) == tokensBefore + 3)
            // A role that does not exist is the client's mistake.
            let unknown = try await server.request(
                "POST", "/api/auth/login", json: ["email": driver.email, "password": driver.password, "role": "admin"])
            #expect(unknown.status == 400 && unknown.errorCode == "invalid_field", "got \(unknown.status) \(unknown.text)")
        }
    }

    /// The token cache's second is measured on a clock that never steps: with the wall clock set
    /// back an hour, a cached token was served without a store read for that hour, also after it
    /// expired or was revoked where this node could not hear of it.
    @Test func aClockSetBackDoesNotKeepACachedTokenAlive() async throws {
        let clock = OffsetWallClock()
        try await TestServer.withRunning(clock: clock) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            #expect(try await server.request("GET", "/api/me", token: seed.dispatcherToken).status == 200)  // cached
            let db = try SQLiteConnection(path: server.directory.appendingPathComponent("waybill.sqlite").path)
            try db.execute("DELETE FROM api_tokens")  // gone, as if expired: only the cache still knows it
            db.close()
            clock.step(by: -3600)
            try await Task.sleep(for: .milliseconds(1_300))
            #expect(try await server.request("GET", "/api/me", token: seed.dispatcherToken).status == 401)
        }
    }

    private static func tokenCount(_ server: TestServer) throws -> Int {
        let db = try SQLiteConnection(path: server.directory.appendingPathComponent("waybill.sqlite").path)
        defer { db.close() }
        return try db.queryFirst("SELECT count(*) FROM api_tokens") { row in row.int(0) } ?? -1
    }

    @Test func emailIsCaseInsensitiveAtLogin() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let login = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email.uppercased(), "password": seed.dispatcher.password])
            #expect(login.status == 200)
        }
    }

    @Test func wrongPasswordAndUnknownEmailAre401() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let wrong = try await server.request("POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": "nope"])
            #expect(wrong.status == 401)
            #expect(wrong.errorCode == "invalid_credentials")
            let unknown = try await server.request("POST", "/api/auth/login", json: ["email": "who@example.com", "password": "x"])
            #expect(unknown.status == 401)
            #expect(unknown.object.string("message") == wrong.object.string("message"))
        }
    }

    @Test func repeatedFailedLoginsAreRateLimited() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            var statuses: [Int] = []
            for _ in 0..<11 {
                statuses.append(try await server.request(
                    "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": "bad"]).status)
            }
            #expect(statuses.prefix(10).allSatisfy { $0 == 401 })
            #expect(statuses.last == 429)
            let limited = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
            #expect(limited.status == 429)
            #expect(limited.errorCode == "rate_limited")
        }
    }

    @Test func aParallelBurstOfGuessesCannotSlipPastTheLimit() async throws {
        // A queue long enough for the whole burst: no 503 `overloaded` (LoginFloodTests covers those).
        try await TestServer.withRunning(configure: { $0.keyStretchingQueueLimit = 64 }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<30 {
                    group.addTask {
                        try await server.request(
                            "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": "guess"]).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 401 }.count == 10)
            #expect(statuses.filter { $0 == 429 }.count == 20)
        }
    }

    @Test func missingBadAndRevokedTokensAre401() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            #expect(try await server.request("GET", "/api/orders/").status == 401)
            #expect(try await server.request("GET", "/api/orders/", token: "not-a-token").status == 401)
            #expect(try await server.request("GET", "/api/orders/", headers: ["Authorization": "Basic abc"]).status == 401)
            let driver = seed.drivers[0].token
            #expect(try await server.request("POST", "/api/auth/logout", token: driver).status == 204)
            let after = try await server.request("GET", "/api/me", token: driver)
            #expect(after.status == 401)
            #expect(after.errorCode == "not_authenticated")
        }
    }

    @Test func wsTicketIsIssuedForAnyUser() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let ticket = try await server.request("POST", "/api/ws-ticket", token: seed.drivers[0].token)
            #expect(ticket.status == 200)
            #expect((ticket.object.string("ticket") ?? "").count >= 32)
            #expect(ticket.headers["cache-control"] == "no-store")
            let expires = try #require(ticket.object.int("expires_in"))
            #expect(expires > 0 && expires <= 60)
            #expect(try await server.request("POST", "/api/ws-ticket").status == 401)
        }
    }
}

/// Real time, set off by steps (a clock corrected by hand or by NTP).
final class OffsetWallClock: RealTimeWallClock {
    private let offset = Mutex<TimeInterval>(0)
    func now() -> Date { Date() + offset.withLock { $0 } }
    func step(by seconds: TimeInterval) { offset.withLock { $0 += seconds } }
}
