import Foundation
import Synchronization
import Testing
@testable import WaybillAPI
import WaybillNetwork

/// Hardening item 1: a login flood must not freeze the server nor lock real users out.
/// Password checks here use real PBKDF2 (50,000 iterations, tens of milliseconds each).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct LoginFloodTests {
    static func flooding(_ c: inout ServerConfiguration) {
        c.passwordIterations = 50_000
        c.keyStretchingThreads = 1
        c.keyStretchingQueueLimit = 4
        c.loginAttemptsPerAddress = 100_000  // these tests are about the pool, not the address limit
    }

    @Test func aFloodGets503PastTheBoundAndHealthStaysFast() async throws {
        // Checks 20 times as long as the others' (about 1 s for the five the pool admits; the rest
        // are refused at once): at 50 000 iterations the pool was saturated for about 50 ms, over
        // before a test task delayed on a loaded runner looked (a CI run, 2026-12-07).
        try await TestServer.withRunning(configure: { Self.flooding(&$0); $0.passwordIterations = 1_000_000 }) { server in
            let attacker = AddressedClient(port: server.port, source: "127.0.0.1")
            let flood = Task {
                try await withThrowingTaskGroup(of: AddressedClient.Answer.self) { group in
                    for n in 0..<40 { group.addTask { try await attacker.login("nobody\(n)@example.com", "guess") } }
                    return try await group.reduce(into: [AddressedClient.Answer]()) { $0.append($1) }
                }
            }
            // Probed while the pool is saturated (checks waiting), not before the flood arrives.
            let pool = server.server.pool
            #expect(await server.eventually(timeout: .seconds(10)) { pool.waitingCount > 0 })
            let probe = AddressedClient(port: server.port, source: "127.0.0.9")
            var times: [Duration] = []
            for _ in 0..<10 {
                let health = try await probe.send("GET", "/healthz")
                #expect(health.status == 200)
                times.append(health.elapsed)
            }
            times.sort()
            let answers = try await flood.value
            let refused = answers.filter { $0.status == 503 }
            #expect(answers.count == 40)
            #expect(answers.allSatisfy { $0.status == 401 || $0.status == 503 })
            #expect(answers.contains { $0.status == 401 }, "the pool still works through the flood")
            #expect(refused.count >= 10, "at most 1 running + 4 waiting at a time: the rest are refused at once")
            #expect(refused.allSatisfy { $0.retryAfter == "1" && $0.body.contains(#""error":"overloaded""#) })
            // A frozen server never answers; five checks in a row on a machine loaded by the whole
            // suite (and, in a stress run, two busy loops) took up to 10 s.
            #expect(answers.allSatisfy { $0.elapsed < .seconds(30) })
            // A bound against a frozen server, not a measure of speed (that is
            // scripts/bench-login-flood.sh's): before the fix every login took a thread and the
            // probes waited for the flood. The median, not the worst: the whole test suite runs in
            // parallel on a small shared machine.
            #expect(times[4] < .milliseconds(1500), "healthz took \(times) during the flood")
        }
    }

    @Test func aRealUserLogsInDuringAFlood() async throws {
        try await TestServer.withRunning(configure: Self.flooding) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let attacker = AddressedClient(port: server.port, source: "127.0.0.1")
            let stats = FloodStats()
            let flood = Task {
                await withTaskGroup(of: Void.self) { group in
                    for worker in 0..<8 {
                        group.addTask {
                            var n = 0
                            while !stats.stopped {
                                n += 1
                                let answer = try? await attacker.login("bot\(worker)-\(n)@example.com", "guess")
                                stats.record(answer?.status ?? 0)
                            }
                        }
                    }
                }
            }
            defer { flood.cancel() }
            // Wait (bounded) until the pool is saturated: the flood is being refused.
            #expect(await server.eventually(timeout: .seconds(10)) { stats.count(503) > 0 })
            let user = AddressedClient(port: server.port, source: "127.0.0.2")
            let login = try await user.login(seed.dispatcher.email, seed.dispatcher.password)
            let stillRefused = stats.count(503)
            stats.stop()
            await flood.value
            #expect(login.status == 200, "got \(login.status): \(login.body)")
            #expect(login.elapsed < .seconds(5), "the login took \(login.elapsed)")
            #expect(stillRefused > 0)
        }
    }

    /// `keyStretchingMaxWait` reaches the server's pool: with one thread and checks of about half a
    /// second, the second of two logins waits one whole check, past a 50 ms bound, and is refused
    /// (503 `overloaded`); with the tests' 30 s bound both run. (The expiry itself:
    /// `KeyStretchingPoolTests`.)
    @Test func theConfiguredMaxWaitBoundsHowLongALoginWaitsForTheHasher() async throws {
        func pair(maxWait: Duration) async throws -> [Int] {
            try await TestServer.withRunning(configure: {
                $0.passwordIterations = 1_000_000
                $0.keyStretchingThreads = 1
                $0.keyStretchingMaxWait = maxWait
            }) { server in
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for n in 0..<2 {
                        group.addTask {
                            let client = AddressedClient(port: server.port, source: "127.0.0.\(n + 20)")
                            return try await client.login("nobody\(n)@example.com", "guess").status
                        }
                    }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }.sorted()
                }
            }
        }
        // "Contains", not "== [401, 503]": a runner that delays the pool's thread past 50 ms may
        // refuse the first check too. Without the setting (the pool's 1 s default) both run.
        #expect(try await pair(maxWait: .milliseconds(50)).contains(503))
        #expect(try await pair(maxWait: .seconds(30)) == [401, 401])
    }

    /// Also for an IPv6 client that comes back from another address of its /64 (the gate once kept
    /// full addresses, so each new one passed it and cost two store writes; found by a review).
    @Test(arguments: [false, true]) func anAddressThatRetriesBeforeRetryAfterIsRefusedAtOnce(fromItsSlash64: Bool)
        async throws
    {
        // The server's clock stands still until the test moves it: on a loaded machine the burst
        // alone can outlast the one second the address is told to wait.
        let clock = SteppedClock()
        let configure: @Sendable (inout ServerConfiguration) -> Void = {
            Self.flooding(&$0)
            $0.trustedProxies = ["127.0.0.7"]
            // Long checks (about 0.4 s each): the early ask must come while the fillers' checks
            // still wait, which at 50 000 iterations lasted tens of milliseconds.
            $0.passwordIterations = 2_000_000
        }
        try await TestServer.withRunning(clock: clock, configure: configure) { server in
            let pushy =
                fromItsSlash64
                ? AddressedClient(port: server.port, source: "127.0.0.7", forwardedFor: "2001:db8:1:2::1")
                : AddressedClient(port: server.port, source: "127.0.0.8")
            let returning =
                fromItsSlash64 ? AddressedClient(port: server.port, source: "127.0.0.7", forwardedFor: "2001:db8:1:2::99") : pushy
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<20 { group.addTask { try await pushy.login("nobody\(n)@example.com", "guess").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            try #require(burst.contains(503))
            // Checks are waiting again (three from another address: the queue, 4, still has room)…
            let filler = AddressedClient(port: server.port, source: "127.0.0.10")
            let filling = Task {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for n in 0..<3 { group.addTask { try await filler.login("someone\(n)@example.com", "guess").status } }
                    return try await group.reduce(into: [Int]()) { $0.append($1) }
                }
            }
            let pool = server.server.pool
            #expect(await server.eventually { pool.waitingCount > 0 })
            // …so the pushy address, told to wait a second, is refused at once when it comes back
            // early, without a password check; and it is served once it waits.
            let early = try await returning.login("nobody@example.com", "guess")
            #expect(early.status == 503 && early.retryAfter == "1")
            #expect(early.elapsed < .seconds(3))
            _ = try await filling.value
            clock.advance(by: 1.1)  // what Retry-After asks for
            #expect(try await returning.login("nobody@example.com", "guess").status == 401)
        }
    }

    /// Drivers behind one NAT who each wait the second they were told still ask more than once a
    /// second together. The gate holds only while password checks are waiting: once the overload is
    /// over, the address gets in at once. Once, every early ask renewed its wait, on an idle server
    /// too, and nobody there got in for as long as anyone asked.
    @Test func anAddressToldToWaitGetsInOnceNoCheckIsWaiting() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: Self.flooding) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let office = AddressedClient(port: server.port, source: "127.0.0.12")
            let burst = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<20 { group.addTask { try await office.login("nobody\(n)@example.com", "guess").status } }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            try #require(burst.contains(503))
            let pool = server.server.pool
            #expect(await server.eventually { pool.waitingCount == 0 })
            // Still inside the second it was told (the clock has not moved), and asking again.
            for _ in 0..<3 {
                #expect(try await office.login(seed.dispatcher.email, seed.dispatcher.password).status == 200)
            }
        }
    }

    @Test func anAttackerAddressCannotLockOutAUserOnAnotherAddress() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let email = seed.dispatcher.email, password = seed.dispatcher.password
            let attacker = AddressedClient(port: server.port, source: "127.0.0.3")
            for _ in 0..<10 { #expect(try await attacker.login(email, "wrong").status == 401) }
            #expect(try await attacker.login(email, "wrong").status == 429)
            // The email is locked for the attacker, even with the right password…
            #expect(try await attacker.login(email, password).status == 429)
            // …but not for its owner, on an address with no failures.
            let owner = AddressedClient(port: server.port, source: "127.0.0.4")
            #expect(try await owner.login(email, password).status == 200)
            #expect(try await owner.login(email, password).status == 200, "a success leaves the address clean")
            // A fresh address gets exactly one try at a locked email: a wrong guess spends it.
            let fresh = AddressedClient(port: server.port, source: "127.0.0.5")
            #expect(try await fresh.login(email, "wrong").status == 401)
            #expect(try await fresh.login(email, password).status == 429)
        }
    }

    /// An office or a carrier NAT is never "clean" for long: someone behind it mistyped something.
    /// A stranger who locks a user's email must not lock them out there: an address that has not
    /// tried that email in the window gets its one try, whatever else failed from it (it once
    /// needed no failures at all; found by a review).
    @Test func aSharedAddressWhereSomeoneElseFailedStillGetsItsTryAtALockedEmail() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let email = seed.dispatcher.email
            let stranger = AddressedClient(port: server.port, source: "127.0.0.3")
            for _ in 0..<10 { #expect(try await stranger.login(email, "wrong").status == 401) }
            #expect(try await stranger.login(email, seed.dispatcher.password).status == 429, "the stranger has had its tries")
            let office = AddressedClient(port: server.port, source: "127.0.0.9")
            #expect(try await office.login(seed.drivers[0].email, "typo").status == 401)  // a colleague's mistake
            #expect(try await office.login(email, seed.dispatcher.password).status == 200)
            #expect(try await office.login(email, seed.dispatcher.password).status == 200, "a success spends no try")
        }
    }

    /// A stranger on the owner's /48 (one carrier's pool) cannot spend the owner's try with one
    /// request: the owner's own /64 still has it (a review found the first version of the /48 rule
    /// gave one try per /48, a lock-out for anyone sharing it).
    @Test func aStrangerOnTheSameSlash48CannotSpendTheOwnersTry() async throws {
        try await TestServer.withRunning(configure: { $0.trustedProxies = ["127.0.0.7"] }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let email = seed.dispatcher.email, password = seed.dispatcher.password
            let locker = AddressedClient(port: server.port, source: "127.0.0.3")
            for _ in 0..<10 { #expect(try await locker.login(email, "wrong").status == 401) }
            let stranger = AddressedClient(port: server.port, source: "127.0.0.7", forwardedFor: "2001:db8:1:9::1")
            #expect(try await stranger.login(email, "wrong").status == 401)
            let owner = AddressedClient(port: server.port, source: "127.0.0.7", forwardedFor: "2001:db8:1:2::1")
            #expect(try await owner.login(email, password).status == 200)
        }
    }

    /// Behind a reverse proxy every client's connection comes from the proxy: with the proxy named
    /// (`--trusted-proxy`), the address it appended to `X-Forwarded-For` is what the throttle counts,
    /// so one client's failures no longer refuse everyone else's logins. From any other peer the
    /// header is ignored, and only the proxy's own (last) entry is believed.
    @Test func behindATrustedProxyTheForwardedAddressIsThrottled() async throws {
        try await TestServer.withRunning(configure: {
            $0.loginAttemptsPerAddress = 5
            $0.trustedProxies = ["127.0.0.7"]
        }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let email = seed.dispatcher.email, password = seed.dispatcher.password
            let proxy = "127.0.0.7"
            // The client prepends made-up entries; only the proxy's own (last) one counts.
            let sprayer = AddressedClient(port: server.port, source: proxy, forwardedFor: "203.0.113.1, 10.1.1.1")
            for n in 0..<5 { #expect(try await sprayer.login("user\(n)@example.com", "guess").status == 401) }
            #expect(try await sprayer.login("user5@example.com", "guess").status == 429)
            let colleague = AddressedClient(port: server.port, source: proxy, forwardedFor: "10.1.1.2")
            let colleagueAnswer = try await colleague.login(email, password)
            #expect(colleagueAnswer.status == 200, "another client behind the same proxy: \(colleagueAnswer.body)")
            let changedPrefix = AddressedClient(port: server.port, source: proxy, forwardedFor: "198.51.100.9, 10.1.1.1")
            #expect(try await changedPrefix.login("user6@example.com", "guess").status == 429)

            // Not from the proxy: the header is the client's own claim and changes nothing.
            for n in 0..<5 {
                let liar = AddressedClient(port: server.port, source: "127.0.0.8", forwardedFor: "10.9.9.\(n)")
                #expect(try await liar.login("other\(n)@example.com", "guess").status == 401)
            }
            let liar = AddressedClient(port: server.port, source: "127.0.0.8", forwardedFor: "10.9.9.99")
            #expect(try await liar.login("other9@example.com", "guess").status == 429)
        }
    }

    /// IPv6 addresses count by their /64 (one subscriber holds a whole /64): a fresh address in the
    /// attacker's /64 gets no new try at a locked email.
    @Test func ipv6AddressesAreThrottledByTheirSlash64() async throws {
        try await TestServer.withRunning(configure: { $0.trustedProxies = ["127.0.0.7"] }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            let email = seed.dispatcher.email
            let locker = AddressedClient(port: server.port, source: "127.0.0.3")
            for _ in 0..<10 { #expect(try await locker.login(email, "wrong").status == 401) }
            func from(_ address: String) -> AddressedClient {
                AddressedClient(port: server.port, source: "127.0.0.7", forwardedFor: address)
            }
            #expect(try await from("2001:db8:1:2::1").login(email, "wrong").status == 401, "the /64's one try")
            for n in 2...6 {
                #expect(try await from("2001:db8:1:2::\(n)").login(email, "wrong").status == 429)
            }
            // Another /64 of the /48 is another client, but a /48 holds 65 536 of them: it gets 16
            // tries at the locked email in all (found by a review: each /64 was a fresh try).
            var tries: [Int] = []
            for n in 3...18 { tries.append(try await from("2001:db8:1:\(n)::1").login(email, "wrong").status) }
            #expect(tries == Array(repeating: 401, count: 15) + [429], "\(tries)")
            #expect(try await from("2001:db8:2:1::1").login(email, "wrong").status == 401, "another /48 is another client")
        }
        #expect(ClientAddress.throttleKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64")
        #expect(ClientAddress.throttleKey("::1") == "0:0:0:0::/64")
        #expect(ClientAddress.throttleKey("10.0.0.5") == "10.0.0.5")
        #expect(ClientAddress.wideKey("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1::/48")
        #expect(ClientAddress.wideKey("10.0.0.5") == "10.0.0.5")
    }

    /// A login refused for a locked email checks no password, so it is no failure of the address:
    /// a driver retrying it (or many behind one NAT) does not use up the address's quota.
    @Test func refusalsForALockedEmailDoNotCountAgainstTheAddress() async throws {
        try await TestServer.withRunning(configure: { $0.loginAttemptsPerAddress = 5 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let locked = seed.dispatcher.email
            for source in ["127.0.0.3", "127.0.0.4"] {  // five failures each: the email's ten
                let locker = AddressedClient(port: server.port, source: source)
                for _ in 0..<5 { #expect(try await locker.login(locked, "wrong").status == 401) }
            }
            let shared = AddressedClient(port: server.port, source: "127.0.0.9")
            #expect(try await shared.login("nobody@example.com", "wrong").status == 401)  // not clean any more
            #expect(try await shared.login(locked, "wrong").status == 401, "the address's one try at the locked email")
            for _ in 0..<8 { #expect(try await shared.login(locked, "wrong").status == 429) }
            // Two failures of its five: the eight refusals took none.
            let driver = seed.drivers[0]
            #expect(try await shared.login(driver.email, driver.password).status == 200)
        }
    }

    /// Hashes made under another `--password-iterations` (here: seeded at 1 000, served at 50 000)
    /// must not answer at another speed than an unknown email: that told an attacker which emails
    /// exist. Compared with a 3× margin around an effect of about 10× before the fix.
    @Test func anUnknownEmailTakesAsLongAsAWrongPasswordWhateverTheStoredIterations() async throws {
        try await TestServer.withRunning(configure: { $0.passwordIterations = 50_000 }) { server in
            let seed = try await server.seed(drivers: 0, orders: 0)
            var known: [Duration] = [], unknown: [Duration] = []
            for n in 0..<5 {
                let client = AddressedClient(port: server.port, source: "127.0.1.\(n + 1)")
                let wrong = try await client.login(seed.dispatcher.email, "wrong")
                let nobody = try await client.login("nobody\(n)@example.com", "wrong")
                #expect(wrong.status == 401 && nobody.status == 401)
                known.append(wrong.elapsed)
                unknown.append(nobody.elapsed)
            }
            let medianKnown = known.sorted()[2], medianUnknown = unknown.sorted()[2]
            #expect(medianUnknown < medianKnown * 3 && medianKnown < medianUnknown * 3, "\(known) vs \(unknown)")
        }
        let hasher = PasswordHasher(iterations: 1_000)
        let stronger = PasswordHasher(iterations: 5_000).hashNow("pw")
        #expect(hasher.checkIterations == 1_000)
        #expect(try await !hasher.verify("other", against: stronger))
        #expect(hasher.checkIterations == 5_000, "an unknown email now burns what that hash costs")
    }

    /// Iteration counts OpenSSL cannot run never stop the process: a stored hash that claims more
    /// than `maxIterations` is not a hash (it matches nothing, and does not raise what later
    /// logins cost), and a hasher made with 0 (a library user's setting; the command line refuses
    /// it) still answers an unknown email. Both trapped before.
    @Test func iterationCountsOutOfRangeNeitherTrapNorMatch() async throws {
        let salt = Data([1, 2, 3]).base64EncodedString(), digest = Data(repeating: 4, count: 32).base64EncodedString()
        #expect(PasswordHasher.parse("pbkdf2_sha256$2147483648$\(salt)$\(digest)") == nil)
        #expect(PasswordHasher.parse("pbkdf2_sha256$2147483647$\(salt)$\(digest)") == nil)
        #expect(PasswordHasher.parse("pbkdf2_sha256$10000001$\(salt)$\(digest)") == nil)
        #expect(PasswordHasher.parse("pbkdf2_sha256$10000000$\(salt)$\(digest)") != nil)
        let hasher = PasswordHasher(iterations: 1_000)
        #expect(try await !hasher.verify("pw", against: "pbkdf2_sha256$99999999999$\(salt)$\(digest)"))
        #expect(try await !hasher.verify("pw", against: "pbkdf2_sha256$2000000000$\(salt)$\(digest)"))
        #expect(hasher.checkIterations == 1_000, "a hash that is not ours does not raise what logins cost")
        try await PasswordHasher(iterations: 0).verifyNothing("pw")
        // A library user's setting past the limit would make hashes nothing can read: kept within it.
        #expect(PasswordHasher(iterations: 20_000_000).iterations == PasswordHasher.maxIterations)
        #expect(PasswordHasher(iterations: 0).iterations == 1)
        var changed = PasswordHasher(iterations: 1_000)
        changed.iterations = 99_000_000
        #expect(changed.iterations == PasswordHasher.maxIterations, "also when changed after")
        // A digest of another length, or no salt, is not a hash of this format: an empty digest
        // compared equal to a PBKDF2 of length 0, and every password matched it.
        for malformed in ["pbkdf2_sha256$1$\(salt)$", "pbkdf2_sha256$1$$", "pbkdf2_sha256$1$$\(digest)",
                          "pbkdf2_sha256$1$\(salt)$\(Data([4, 5, 6]).base64EncodedString())"] {
            #expect(PasswordHasher.parse(malformed) == nil, "\(malformed)")
            #expect(try await !hasher.verify("anything", against: malformed), "\(malformed)")
        }
        #expect(Crypto.pbkdf2(password: "pw", salt: [0], iterations: 0) == Crypto.pbkdf2(password: "pw", salt: [0], iterations: 1))
    }

    /// A client that keeps asking after its 429 is refused again for a few seconds without a store
    /// write (each refused login used to cost a write transaction on the writer order writes need).
    @Test func repeatedLoginsPastTheLimitCostNoStoreWrites() async throws {
        try await TestServer.withRunning(configure: { $0.loginAttemptsPerAddress = 3 }) { server in
            _ = try await server.seed(drivers: 0, orders: 0)
            let pushy = AddressedClient(port: server.port, source: "127.0.0.11")
            for n in 0..<3 { #expect(try await pushy.login("user\(n)@example.com", "guess").status == 401) }
            #expect(try await pushy.login("user3@example.com", "guess").status == 429)
            func writes() async throws -> Int {
                let text = try await server.request("GET", "/metrics").text
                let line = text.split(separator: "\n").first { $0.hasPrefix("waybill_store_transactions_total{kind=\"write\"}") }
                // Required: a missing or renamed metric read as -1 both times, and the check passed.
                let value = try #require(line?.split(separator: " ").last, "\(text)")
                return try #require(Int(value), "\(text)")
            }
            let before = try await writes()
            #expect(before > 0, "the seed and the 401s were store writes")
            for n in 0..<30 { #expect(try await pushy.login("other\(n)@example.com", "guess").status == 429) }
            let after = try await writes()
            #expect(after - before < 5, "\(after - before) store writes for 30 refused logins")
            // Another client is not affected.
            let other = AddressedClient(port: server.port, source: "127.0.0.12")
            #expect(try await other.login("user0@example.com", "guess").status == 401)
        }
    }

    /// The 429 remembered on the node lasts its 10 s however often the client asks meanwhile: the
    /// throttle's window, not the client's persistence, decides when it may try again (a shared
    /// address would otherwise stay out for as long as anyone behind it kept trying).
    @Test func theRemembered429EndsOnTimeWhileTheClientKeepsAsking() async throws {
        let clock = SteppedClock()
        try await TestServer.withRunning(clock: clock, configure: { $0.loginAttemptsPerAddress = 3 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let pushy = AddressedClient(port: server.port, source: "127.0.0.13")
            for n in 0..<3 { #expect(try await pushy.login("user\(n)@example.com", "guess").status == 401) }
            #expect(try await pushy.login("user3@example.com", "guess").status == 429)  // remembered until +10 s
            // A driver behind that address keeps retrying every 6 s for longer than the throttle's
            // 5-minute window: once the window has passed, the right password gets in.
            let driver = seed.drivers[0]
            var answers: [Int] = []
            for _ in 0..<60 {
                clock.advance(by: 6)
                answers.append(try await pushy.login(driver.email, driver.password).status)
            }
            #expect(answers.prefix(40).allSatisfy { $0 == 429 }, "\(answers)")
            #expect(answers.suffix(5).allSatisfy { $0 == 200 }, "\(answers)")
        }
    }

    /// A full gate drops the entries that end soonest, never all of them: a flood of fresh
    /// addresses once emptied it and let every client it held back in (found by a review).
    @Test func aFullGateKeepsTheClientsThatKeepPushing() {
        let gate = RetryAfterGate(seconds: 1, capacity: 100)
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        gate.refused("pushy", now: t0)
        for n in 0..<1_000 {
            let now = t0.addingTimeInterval(Double(n) / 2_000)  // 1 000 fresh addresses in half a second
            #expect(gate.mustWait("pushy", now: now), "held at \(n)")  // and it keeps asking: renewed
            gate.refused("fresh-\(n)", now: now)
        }
        #expect(gate.mustWait("pushy", now: t0.addingTimeInterval(0.6)))
        #expect(!gate.mustWait("fresh-0", now: t0.addingTimeInterval(0.6)), "the oldest went")
    }

    @Test func forwardedAddressesAreParsedStrictly() {
        let resolver = ClientAddress(trustedProxies: ["127.0.0.1"])
        func resolve(_ forwarded: String?, from peer: String = "127.0.0.1") -> String {
            let headers = HTTPHeaders(forwarded.map { [("X-Forwarded-For", $0)] } ?? [])
            return resolver.of(HTTPRequest(method: "POST", path: "/api/auth/login", headers: headers, remoteAddress: peer))
        }
        #expect(resolve("10.0.0.5") == "10.0.0.5")
        #expect(resolve("1.2.3.4,  2001:db8::1 ") == "2001:db8::1")
        #expect(resolve("::ffff:10.0.0.6") == "10.0.0.6")
        #expect(resolve(nil) == "127.0.0.1")
        #expect(resolve("10.0.0.5, unknown") == "127.0.0.1")
        #expect(resolve("10.0.0.5, ") == "127.0.0.1")
        #expect(resolve("10.0.0.5:443") == "127.0.0.1")  // an address with a port is not an address
        #expect(resolve("0:0:0:0:0:0:0:1") == "::1")  // the same key however the proxy wrote it
        #expect(resolve("10.0.0.5", from: "127.0.0.2") == "127.0.0.2")
        #expect(!ClientAddress.isAddress("proxy.example.com") && ClientAddress.isAddress("::1"))
        // A proxy named in another spelling of the same address still matches the peer.
        for spelling in ["::ffff:127.0.0.1", "0:0:0:0:0:ffff:7f00:1"] {
            let other = ClientAddress(trustedProxies: [spelling])
            #expect(other.of(HTTPRequest(method: "POST", path: "/", headers: HTTPHeaders([("X-Forwarded-For", "10.0.0.8")]), remoteAddress: "127.0.0.1")) == "10.0.0.8")
        }
        #expect(ClientAddress.normalized("0:0:0:0:0:0:0:1") == "::1" && ClientAddress.normalized("FE80::1") == "fe80::1")
    }

    @Test func thePerAddressLimitAppliesAcrossEmails() async throws {
        try await TestServer.withRunning(configure: { $0.loginAttemptsPerAddress = 5 }) { server in
            let sprayer = AddressedClient(port: server.port, source: "127.0.0.6")
            for n in 0..<5 { #expect(try await sprayer.login("user\(n)@example.com", "guess").status == 401) }
            let refused = try await sprayer.login("user5@example.com", "guess")
            #expect(refused.status == 429)
            #expect(refused.body.contains(#""error":"rate_limited""#))
            let other = AddressedClient(port: server.port, source: "127.0.0.7")
            #expect(try await other.login("user5@example.com", "guess").status == 401)
        }
    }
}

/// Counts a flood's answers by status; `stopped` ends the flood's loops.
final class FloodStats: Sendable {
    private let state = Mutex<(counts: [Int: Int], stopped: Bool)>(([:], false))
    func record(_ status: Int) { state.withLock { $0.counts[status, default: 0] += 1 } }
    func count(_ status: Int) -> Int { state.withLock { $0.counts[status] ?? 0 } }
    var stopped: Bool { state.withLock { $0.stopped } }
    func stop() { state.withLock { $0.stopped = true } }
}

/// A wall clock that stands still until `advance` moves it.
final class SteppedClock: WallClock {
    private let current = Mutex(Date())
    func now() -> Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}
