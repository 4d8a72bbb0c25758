import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

@Suite struct UsersConformanceTests {
    @Test(arguments: Backend.allCases) func usersAndCompaniesReadBack(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let found = try await store.read { tx in
                (
                    try tx.company(fixture.acme.id), try tx.user(fixture.bob.id), try tx.drivers(in: fixture.acme.id),
                    try tx.company(CompanyID(999)), try tx.user(UserID(999))
                )
            }
            #expect(found.0 == fixture.acme)
            #expect(found.1 == fixture.bob)
            #expect(found.2 == [fixture.alice, fixture.bob])
            #expect(found.3 == nil)
            #expect(found.4 == nil)
        }
    }

    @Test(arguments: Backend.allCases) func emailIsUniqueIgnoringCaseAndFoundIgnoringCase(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let imposter = await #expect(throws: StoreError.self) {
                try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "ALICE@Acme.Test", name: "Imposter", passwordHash: "x")
                }
            }
            expectConflict(imposter)
            _ = try await store.write { tx in
                try tx.insertUser(
                    companyID: nil, role: .driver, email: "Élodie@acme.test", name: "É", passwordHash: "x")
            }
            let accented = await #expect(throws: StoreError.self) {
                try await store.write { tx in
                    try tx.insertUser(
                        companyID: nil, role: .driver, email: "éLODIE@ACME.TEST", name: "é", passwordHash: "y")
                }
            }
            expectConflict(accented)
            let found = try await store.read { tx in try tx.credentials(email: "Alice@ACME.test") }
            #expect(found?.user == fixture.alice)
            #expect(found?.passwordHash == "h2")
            #expect(try await store.read { tx in try tx.credentials(email: "nobody@acme.test") } == nil)
        }
    }

    @Test(arguments: Backend.allCases) func tokensAuthenticateByHashUntilRevokedOrExpired(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let forever: [UInt8] = Array(repeating: 1, count: 32)
            let shortLived: [UInt8] = Array(repeating: 2, count: 32)
            let bobs: [UInt8] = Array(repeating: 3, count: 32)
            try await store.write { tx in
                try tx.insertToken(hash: forever, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
                try tx.insertToken(hash: shortLived, for: fixture.alice.id, createdAt: t0, expiresAt: t0 + 60)
                try tx.insertToken(hash: bobs, for: fixture.bob.id, createdAt: t0, expiresAt: nil)
            }
            let before = try await store.read { tx in
                (
                    try tx.user(tokenHash: forever, now: t0), try tx.user(tokenHash: shortLived, now: t0 + 59),
                    try tx.user(tokenHash: shortLived, now: t0 + 60),
                    try tx.user(tokenHash: Array(repeating: 9, count: 32), now: t0)
                )
            }
            #expect(before.0?.user == fixture.alice)
            #expect(before.1?.user == fixture.alice)
            #expect(before.2 == nil, "an expired token must not authenticate")
            #expect(before.3 == nil)

            try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            let after = try await store.read { tx in
                (try tx.user(tokenHash: forever, now: t0), try tx.user(tokenHash: bobs, now: t0))
            }
            #expect(after.0 == nil, "a revoked token must not authenticate")
            #expect(after.1?.user == fixture.bob, "revoking one user's tokens leaves others alone")
        }
    }

    /// A user that does not exist: a token for it is a conflict and a logout of it is `notFound`,
    /// the same on both stores (SQLite failed the token's NOT NULL epoch first, a 500; the two
    /// logouts threw different failures; a store comparison, 2026-12-05).
    @Test(arguments: Backend.allCases) func aTokenOrALogoutOfNoUserFailsTheSameOnBothStores(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            _ = try await Fixture.seed(store)
            await #expect {
                try await store.write { tx in try tx.insertToken(hash: [1, 2, 3], for: UserID(999_999), createdAt: t0, expiresAt: nil) }
            } throws: { error in
                if case .conflict? = error as? StoreError { return true }
                return false
            }
            await #expect {
                try await store.write { tx in try tx.revokeTokens(of: UserID(999_999)) }
            } throws: { error in
                if case .notFound? = error as? StoreError { return true }
                return false
            }
        }
    }

    /// A token's last use starts at its login and only moves forward (`touchToken`): a node whose
    /// clock is behind never takes it back, so another node's idle check never sees it older.
    @Test(arguments: Backend.allCases) func aTokensLastUseStartsAtLoginAndOnlyMovesForward(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let token: [UInt8] = Array(repeating: 4, count: 32), other: [UInt8] = Array(repeating: 5, count: 32)
            try await store.write { tx in
                try tx.insertToken(hash: token, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
                try tx.insertToken(hash: other, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
            }
            func lastUse(_ hash: [UInt8]) async throws -> Date? {
                try await store.read { tx in try tx.user(tokenHash: hash, now: t0) }?.lastUsedAt
            }
            #expect(try await lastUse(token) == t0, "used at its login")
            try await store.write { tx in try tx.touchToken(hash: token, at: t0 + 600) }
            #expect(try await lastUse(token) == t0 + 600)
            try await store.write { tx in try tx.touchToken(hash: token, at: t0 + 300) }
            #expect(try await lastUse(token) == t0 + 600, "never back")
            #expect(try await lastUse(other) == t0, "another token is left alone")
        }
    }

    @Test(arguments: Backend.allCases) func aTicketWorksOnceAndNotAfterExpiry(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let ticket: [UInt8] = Array(repeating: 7, count: 32)
            let stale: [UInt8] = Array(repeating: 8, count: 32)
            try await store.write { tx in
                try tx.insertTicket(hash: ticket, for: fixture.alice.id, epoch: SessionEpoch(3), expiresAt: t0 + 60)
                try tx.insertTicket(hash: stale, for: fixture.bob.id, epoch: SessionEpoch(0), expiresAt: t0 + 10)
            }
            let uses = try await store.write { tx in
                (try tx.consumeTicket(hash: ticket, now: t0 + 5), try tx.consumeTicket(hash: ticket, now: t0 + 6))
            }
            #expect(uses.0?.user == fixture.alice.id)
            #expect(uses.0?.epoch == SessionEpoch(3), "a ticket keeps its token's epoch")
            #expect(uses.1 == nil, "a ticket is single use")
            #expect(try await store.write { tx in try tx.consumeTicket(hash: stale, now: t0 + 10) } == nil)
            #expect(
                try await store.write { tx in try tx.consumeTicket(hash: stale, now: t0) } == nil,
                "an expired ticket is deleted when presented")
        }
    }

    /// A ticket presented on a node whose clock runs ahead does not sweep the other nodes' live
    /// tickets: it swept every ticket expired by its own clock, so one node a minute ahead logged
    /// out clients connecting to every other node.
    @Test(arguments: Backend.allCases) func aNodeAheadDoesNotSweepTicketsOthersStillHonour(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let live: [UInt8] = Array(repeating: 7, count: 32), old: [UInt8] = Array(repeating: 9, count: 32)
            try await store.write { tx in
                try tx.insertTicket(hash: live, for: fixture.alice.id, epoch: SessionEpoch(0), expiresAt: t0 + 30)
                try tx.insertTicket(hash: old, for: fixture.bob.id, epoch: SessionEpoch(0), expiresAt: t0 - 600)
            }
            // A handshake with an unknown ticket on a node 90 s ahead.
            #expect(try await store.write { tx in try tx.consumeTicket(hash: Array(repeating: 8, count: 32), now: t0 + 90) } == nil)
            let redeemed = try await store.write { tx in try tx.consumeTicket(hash: live, now: t0 + 1) }
            #expect(redeemed?.user == fixture.alice.id, "the node with the right time still honours it")
            // Tickets long expired are still swept: presented at a time before its expiry it would
            // be honoured, had the handshake at t0 + 90 not deleted it.
            #expect(try await store.write { tx in try tx.consumeTicket(hash: old, now: t0 - 1_000) } == nil, "swept")
        }
    }

    /// A ticket taken before a logout must not open a socket after it (SPEC §2: logout ends every
    /// session of the user): revoking the tokens deletes the user's unredeemed tickets, no one else's.
    @Test(arguments: Backend.allCases) func revokingTheTokensDeletesTheUsersTickets(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let alices: [UInt8] = Array(repeating: 4, count: 32)
            let bobs: [UInt8] = Array(repeating: 5, count: 32)
            try await store.write { tx in
                try tx.insertTicket(hash: alices, for: fixture.alice.id, epoch: SessionEpoch(0), expiresAt: t0 + 60)
                try tx.insertTicket(hash: bobs, for: fixture.bob.id, epoch: SessionEpoch(0), expiresAt: t0 + 60)
                try tx.revokeTokens(of: fixture.alice.id)
            }
            let uses = try await store.write { tx in
                (try tx.consumeTicket(hash: alices, now: t0 + 1), try tx.consumeTicket(hash: bobs, now: t0 + 1))
            }
            #expect(uses.0 == nil, "the logged-out user's ticket is gone")
            #expect(uses.1?.user == fixture.bob.id, "another user's ticket still works")
        }
    }

    /// A ticket issued while a logout commits: the ticket's transaction checked the token
    /// (`validTokenUser`) and is about to insert; the logout starts meanwhile (on PostgreSQL, on a
    /// second connection). Whatever the order, the ticket must not survive the logout.
    @Test(arguments: Backend.allCases) func aTicketIssuedDuringALogoutDoesNotSurviveIt(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let token: [UInt8] = Array(repeating: 6, count: 32), ticket: [UInt8] = Array(repeating: 7, count: 32)
            let alice = fixture.alice.id
            try await store.write { tx in try tx.insertToken(hash: token, for: alice, createdAt: t0, expiresAt: nil) }
            let checked = Mutex(false)
            async let issuing: Bool = store.write { tx in
                guard let valid = try tx.validTokenUser(tokenHash: token, now: t0 + 1), valid.user == alice else {
                    return false
                }
                checked.withLock { $0 = true }
                Thread.sleep(forTimeInterval: 0.3)  // the logout runs now, on the other connection
                try tx.insertTicket(hash: ticket, for: alice, epoch: valid.epoch, expiresAt: t0 + 60)
                return true
            }
            let deadline = Date() + 10
            while !checked.withLock({ $0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            try await store.write { tx in try tx.revokeTokens(of: alice) }
            _ = try await issuing
            #expect(try await store.write { tx in try tx.consumeTicket(hash: ticket, now: t0 + 2) } == nil)
            #expect(try await store.write { tx in try tx.validTokenUser(tokenHash: token, now: t0 + 2) } == nil)
        }
    }

    @Test(arguments: Backend.allCases) func anEmptyHashIsStoredAndMatchedExactly(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let user = try await store.write { tx in
                try tx.insertTicket(hash: [], for: fixture.alice.id, epoch: SessionEpoch(0), expiresAt: t0 + 60)
                return try tx.consumeTicket(hash: [], now: t0)
            }
            #expect(user?.user == fixture.alice.id)
        }
    }

    @Test(arguments: Backend.allCases) func hashesKeepEveryByteValue(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let hash = (0...255).map(UInt8.init)
            try await store.write { tx in
                try tx.insertToken(hash: hash, for: fixture.bob.id, createdAt: t0, expiresAt: nil)
            }
            let found = try await store.read { tx in
                (try tx.user(tokenHash: hash, now: t0), try tx.user(tokenHash: Array(hash.dropLast()), now: t0))
            }
            #expect(found.0?.user == fixture.bob)
            #expect(found.1 == nil)
        }
    }

    /// Session epochs: a logout revokes exactly the tokens made before it, which carry a smaller
    /// epoch than the one it records; a token made after it carries that epoch, and so does a
    /// ticket issued for it.
    @Test(arguments: Backend.allCases) func aLogoutStartsAnEpochThatTellsItsTokensFromLaterOnes(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let alice = fixture.alice.id
            let old: [UInt8] = Array(repeating: 1, count: 32), new: [UInt8] = Array(repeating: 2, count: 32)
            let bobs: [UInt8] = Array(repeating: 3, count: 32)
            try await store.write { tx in
                try tx.insertToken(hash: old, for: alice, createdAt: t0, expiresAt: nil)
                try tx.insertToken(hash: bobs, for: fixture.bob.id, createdAt: t0, expiresAt: nil)
            }
            let oldEpoch = try #require(try await store.read { tx in try tx.user(tokenHash: old, now: t0) }?.epoch)
            let logout = try await store.write { tx in try tx.revokeTokens(of: alice) }
            #expect(logout.revokes(oldEpoch))
            try await store.write { tx in try tx.insertToken(hash: new, for: alice, createdAt: t0 + 1, expiresAt: nil) }
            let newEpoch = try #require(try await store.read { tx in try tx.user(tokenHash: new, now: t0 + 1) }?.epoch)
            #expect(!logout.revokes(newEpoch), "a token made after the logout is not one it revoked")
            #expect(try await store.read { tx in try tx.logouts(since: t0) } == [logout], "as every node reads it")

            // A ticket carries the epoch of the token it was issued for.
            let ticket: [UInt8] = Array(repeating: 7, count: 32)
            let redeemed = try await store.write { tx in
                let valid = try #require(try tx.validTokenUser(tokenHash: new, now: t0 + 2))
                try tx.insertTicket(hash: ticket, for: valid.user, epoch: valid.epoch, expiresAt: t0 + 60)
                return try tx.consumeTicket(hash: ticket, now: t0 + 3)
            }
            #expect(redeemed?.user == alice)
            #expect(redeemed?.epoch == newEpoch)

            // The next logout revokes the new token too; another user's epoch did not move.
            let second = try await store.write { tx in try tx.revokeTokens(of: alice) }
            #expect(second.revokes(newEpoch))
            #expect(second.epoch > logout.epoch)
            let bobsEpoch = try #require(try await store.read { tx in try tx.user(tokenHash: bobs, now: t0) }?.epoch)
            #expect(bobsEpoch == oldEpoch)
        }
    }

    /// A login committing while a logout of the same user runs (on PostgreSQL, on a second
    /// connection): its token either carries an epoch the logout did not revoke, or is revoked by
    /// it. Never a valid token of an older epoch, whose sockets that logout would close (a client
    /// told to log in again, holding a token that works).
    @Test(arguments: Backend.allCases) func aLoginDuringALogoutIsNeitherClosedNorKept(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let token: [UInt8] = Array(repeating: 6, count: 32), alice = fixture.alice.id
            let inserted = Mutex(false)
            let loginCommitted = Mutex<ContinuousClock.Instant?>(nil)
            // The login does not commit before the test has asked for the logout: with only a sleep,
            // a test task resumed late (a busy runner) asked after the commit.
            let logoutAsked = DispatchSemaphore(value: 0)
            async let login: Void = {
                try await store.write { tx in
                    try tx.insertToken(hash: token, for: alice, createdAt: t0, expiresAt: nil)
                    inserted.withLock { $0 = true }
                    _ = logoutAsked.wait(timeout: .now() + 10)
                    Thread.sleep(forTimeInterval: 0.3)  // the logout runs now, on the other connection
                }
                loginCommitted.withLock { $0 = .now }
            }()
            let deadline = Date() + 10
            while !inserted.withLock({ $0 }), Date() < deadline { try await Task.sleep(for: .milliseconds(5)) }
            try #require(inserted.withLock { $0 }, "the login's insert ran")
            let logoutStarted = ContinuousClock.now
            logoutAsked.signal()
            let logout = try await store.write { tx in try tx.revokeTokens(of: alice) }
            try await login
            // The case under test happened: the logout was asked for before the login committed.
            #expect(logoutStarted < (loginCommitted.withLock { $0 } ?? logoutStarted))
            // Either outcome is right; a valid token of an epoch this logout revoked is not (its
            // sockets were closed while its token kept working). Not found: it was revoked.
            let found = try await store.read { tx in try tx.user(tokenHash: token, now: t0 + 1) }
            if let found { #expect(!logout.revokes(found.epoch), "a valid token its logout's sockets close") }
        }
    }
}
