import Foundation
import Testing
@testable import WaybillAPI
@testable import WaybillSQLite
import WaybillStorage
import WaybillNetwork
import WaybillTesting

/// Hardening item 6 (token expiry, metrics token, CSP) and the error-text part of item 5.
@Suite(.timeLimit(.minutes(1)))
struct SecurityDefaultsTests {
    @Test func tokensExpireAfterTheConfiguredLifetime() async throws {
        let lifetime = Duration.milliseconds(3000)
        try await TestServer.withRunning(configure: { $0.tokenLifetime = lifetime }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let loggingIn = ContinuousClock.now
            let login = try await server.request(
                "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
            let token = try #require(login.object.string("token"))
            let status = try await server.request("GET", "/api/me", token: token).status
            // Valid until its lifetime is over (a CI run once had the process stalled for seconds
            // between the login and this request: then 401 is right, and says nothing).
            #expect(status == 200 || ContinuousClock.now - loggingIn >= lifetime, "\(status)")
            let expired = try await server.eventually(timeout: .seconds(15)) {
                try await server.request("GET", "/api/me", token: token).status == 401
            }
            #expect(expired)
        }
    }

    @Test func theDefaultTokenLifetimeIsThirtyDays() {
        #expect(ServerConfiguration().tokenLifetime == .seconds(30 * 86_400))
        #expect(ServerConfiguration().tokenIdleLimit == .seconds(12 * 3_600))
    }

    /// A dispatcher's token that goes unused for the idle limit stops working (a token copied from
    /// a shared computer's panel works only while its owner keeps using it); each use moves the
    /// limit on, whichever node sees it (the store keeps the last use); a driver's token is not
    /// limited (a phone may sit in a drawer over a weekend). Before, a token worked for its whole
    /// 30 days, used or not.
    @Test func aDispatchersTokenUnusedForTheIdleLimitStopsWorkingADriversDoesNot() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.tokenIdleLimit = .seconds(3_600) }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            func login(_ account: Seeder.Result.Account) async throws -> String {
                let answer = try await server.request(
                    "POST", "/api/auth/login", json: ["email": account.email, "password": account.password])
                return try #require(answer.object.string("token"))
            }
            let dispatcher = try await login(seed.dispatcher), driver = try await login(seed.drivers[0])
            func status(_ token: String) async throws -> Int { try await server.request("GET", "/api/me", token: token).status }
            func lastUse(_ token: String) async throws -> Date? {
                let now = clock.now()
                return try await server.store.read { tx in try tx.user(tokenHash: Secret(token).hash, now: now) }?.lastUsedAt
            }
            #expect(try await status(dispatcher) == 200)
            #expect(try await status(driver) == 200)
            clock.advance(by: 1_800)
            #expect(try await status(dispatcher) == 200, "used after 30 minutes")
            let usedAt = clock.now()
            #expect(await server.eventually {
                guard let kept = try? await lastUse(dispatcher) else { return false }
                return abs(kept.timeIntervalSince(usedAt)) < 0.002  // kept in milliseconds
            }, "the use is kept")
            clock.advance(by: 3_000)
            #expect(try await status(dispatcher) == 200, "50 minutes after its last use")
            clock.advance(by: 3_601)
            #expect(try await status(dispatcher) == 401, "an hour and a second after its last use")
            #expect(try await status(driver) == 200, "a driver's token has no idle limit")
            // Logging in again works at once.
            #expect(try await status(try await login(seed.dispatcher)) == 200)
        }
    }

    /// A token an older release made during a rolling upgrade keeps no last use: it counts as used
    /// at its login (counted as used at its next lookup, a copied token got a fresh limit from
    /// whoever used it next; a review). Tokens that existed at the upgrade count as used then
    /// (`SQLiteMigrationsTests`).
    @Test func aTokenWithoutALastUseCountsAsUsedAtItsLogin() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.tokenIdleLimit = .seconds(3_600) }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            func login() async throws -> String {
                let answer = try await server.request(
                    "POST", "/api/auth/login", json: ["email": seed.dispatcher.email, "password": seed.dispatcher.password])
                return try #require(answer.object.string("token"))
            }
            let used = try await login()
            clock.advance(by: 1_800)
            let unused = try await login()
            let db = try SQLiteConnection(path: server.directory.appendingPathComponent("waybill.sqlite").path)
            try db.execute("UPDATE api_tokens SET last_used_at = NULL")
            db.close()
            clock.advance(by: 1_801)  // an hour and a second after the first login, half an hour after the second
            #expect(try await server.request("GET", "/api/me", token: used).status == 401)
            #expect(try await server.request("GET", "/api/me", token: unused).status == 200)
        }
    }

    @Test func metricsNeedTheTokenWhenOneIsSet() async throws {
        let secret = "metrics-secret-0123456789"
        try await TestServer.withRunning(configure: { $0.metricsToken = secret }) { server in
            let open = try await server.request("GET", "/metrics")
            #expect(open.status == 401)
            #expect(!open.text.contains("waybill_"))
            #expect(try await server.request("GET", "/metrics", token: "metrics-secret-0123456780").status == 401)
            #expect(try await server.request("GET", "/metrics", token: String(secret.dropLast())).status == 401)
            let allowed = try await server.request("GET", "/metrics", token: secret)
            #expect(allowed.status == 200)
            #expect(allowed.text.contains("waybill_"))
            // The rest of the API does not change.
            #expect(try await server.request("GET", "/healthz").status == 200)
        }
    }

    /// Without a metrics token, `/metrics` answers the machine itself only: a loopback peer that
    /// no proxy relays (found by a review: it was open to anyone who could reach the port).
    @Test func withoutATokenMetricsAnswerOnlyOnThisMachine() async throws {
        try await TestServer.withRunning { server in
            #expect(try await server.request("GET", "/metrics").status == 200)
            let relayed = try await server.request("GET", "/metrics", headers: ["X-Forwarded-For": "203.0.113.9"])
            #expect(relayed.status == 403)
            #expect(!relayed.text.contains("waybill_"))
            // End to end, from a raw connection: a rebound name is refused, this machine's is not.
            let port = server.port
            let (rebound, local) = try await runBlocking {
                func get(_ host: String) throws -> Int {
                    let c = try RawConnection(port: port)
                    defer { c.close() }
                    try c.send("GET /metrics HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n")
                    return try c.readResponse().status
                }
                return (try get("evil.example:\(port)"), try get("localhost:\(port)"))
            }
            #expect(rebound == 403 && local == 200)
        }
        for (address, local) in [("127.0.0.1", true), ("127.8.9.10", true), ("::1", true), ("::ffff:127.0.0.1", true),
            ("192.0.2.7", false), ("2001:db8::1", false), ("", false), ("localhost", false)]
        {
            let request = HTTPRequest(method: "GET", path: "/metrics", remoteAddress: address)
            #expect(((try? Routes.requireLocal(request)) != nil) == local, "\(address)")
        }
        // From this machine, a `Host` that names another one is a page whose name was rebound to
        // 127.0.0.1, read from the operator's own browser (DNS rebinding; found by a review).
        let hostname = try #require(Routes.thisMachinesNames.first)
        for (host, local) in [("localhost:8080", true), ("LOCALHOST", true), ("127.0.0.1:9", true), ("[::1]:8080", true),
            ("localhost.:8080", true), ("app.localhost", true), ("ip6-localhost", true), ("127.0.1.1:8080", true),
            ("\(hostname):8080", true),
            ("evil.example:8080", false), ("evil.example", false), ("127.0.0.1.evil.example", false), ("[2001:db8::1]:80", false),
            ("localhost.evil.example", false)]
        {
            let request = HTTPRequest(
                method: "GET", path: "/metrics", headers: HTTPHeaders([("Host", host)]), remoteAddress: "127.0.0.1")
            #expect(((try? Routes.requireLocal(request)) != nil) == local, "\(host)")
        }
    }

    @Test func thePanelMayOpenWebSocketsToItsOwnHostOnly() async throws {
        try await TestServer.withRunning { server in
            let page = try await server.request("GET", "/")
            let policy = try #require(page.headers.first { $0.key.lowercased() == "content-security-policy" }?.value)
            #expect(policy.contains("frame-ancestors 'none'"))
            // And for browsers that predate frame-ancestors.
            #expect(page.headers.first { $0.key.lowercased() == "x-frame-options" }?.value == "DENY")
            let connect = try #require(policy.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
                .first { $0.hasPrefix("connect-src ") })
            let sources = connect.split(separator: " ").dropFirst().map(String.init)
            #expect(sources.contains("'self'"))
            for source in sources where source != "'self'" {
                let host = "127.0.0.1:\(server.port)"
                #expect(source == "ws://\(host)" || source == "wss://\(host)", "connect-src allows \(source)")
            }
            #expect(!sources.contains("ws:") && !sources.contains("wss:"))
            // A forged Host header cannot add sources or directives.
            let port = server.port
            let forged = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send("GET / HTTP/1.1\r\nHost: evil.example; script-src *\r\nConnection: close\r\n\r\n")
                return try c.readResponse()
            }
            let forgedPolicy = try #require(forged.headers.first { $0.name == "content-security-policy" }?.value)
            #expect(!forgedPolicy.contains("evil") && !forgedPolicy.contains("*"))
        }
    }

    @Test func storeConstraintTextNeverReachesClients() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-conflict-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try SQLiteOrderStore(path: directory.appendingPathComponent("w.sqlite").path)
        defer { store.close() }
        _ = try await Seeder(store: store, passwordIterations: 1_000).seed(.init(companyName: "A", drivers: 0, ordersPerDriver: 0))
        // A second company with the same email domain collides on the unique email: a real SQLite error.
        var failure: (any Error)?
        do {
            _ = try await Seeder(store: store, passwordIterations: 1_000).seed(
                .init(companyName: "B", drivers: 0, ordersPerDriver: 0, emailDomain: "company1.example.com"))
        } catch { failure = error }
        let error = try #require(failure)
        guard case StoreError.conflict(let raw)? = error as? StoreError else {
            Issue.record("expected a conflict, got \(error)")
            return
        }
        #expect(raw.contains("UNIQUE"), "the store's own text still says what failed (for logs)")
        let api = APIError(error)
        #expect(api.status == 409 && api.code == "conflict")
        for leak in ["UNIQUE", "constraint", "users", "email", raw] { #expect(!api.message.contains(leak)) }
    }

    @Test func overloadIsA503WithRetryAfter() {
        let api = APIError(KeyStretchingPool.Overloaded())
        #expect(api.status == 503 && api.code == "overloaded" && api.retryAfter == 1)
        #expect(!api.isServerFault, "a flood must not write an error line per refused login")
    }
}
