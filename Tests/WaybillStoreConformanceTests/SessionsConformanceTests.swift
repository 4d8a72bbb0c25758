import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

/// What every node must agree on about sessions: logouts and the login throttle.
@Suite struct SessionsConformanceTests {
    @Test(arguments: Backend.allCases) func revokingTokensRecordsALogoutAtTheStoresClock(
        _ backend: Backend
    ) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            clock.set(t0 + 10)
            try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            clock.set(t0 + 20)
            try await store.write { tx in try tx.revokeTokens(of: fixture.bob.id) }
            @Sendable func withoutIDs(_ logouts: [Logout]) -> [Logout] {
                logouts.map { Logout(userID: $0.userID, at: $0.at, epoch: $0.epoch) }
            }
            let logouts = try await store.read { tx in
                (
                    withoutIDs(try tx.logouts(since: t0)), withoutIDs(try tx.logouts(since: t0 + 10)),
                    withoutIDs(try tx.logouts(since: t0 + 10.001))
                )
            }
            #expect(
                logouts.0 == [
                    Logout(userID: fixture.alice.id, at: t0 + 10, epoch: SessionEpoch(1)),
                    Logout(userID: fixture.bob.id, at: t0 + 20, epoch: SessionEpoch(1)),
                ])
            #expect(logouts.1 == logouts.0, "since is inclusive")
            #expect(logouts.2 == [Logout(userID: fixture.bob.id, at: t0 + 20, epoch: SessionEpoch(1))])

            // What revoking returns is what a poll reads, to the millisecond the store keeps.
            clock.set(t0 + 30.0004)
            let returned = try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            #expect(try await store.read { tx in try tx.logouts(since: t0 + 25) } == [returned])

            #expect(try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 15, limit: 100) } == 1)
            #expect(try await store.read { tx in try tx.logouts(since: t0) }.map(\.userID) == [fixture.bob.id, fixture.alice.id])
        }
    }

    /// A poll also returns every logout with an id above the one it names, however long ago it is
    /// stamped (a node whose clock runs behind), and says the newest id recorded; ids grow with
    /// each logout. Without an id it reads by time only.
    @Test(arguments: Backend.allCases) func aLogoutPollReadsByTimeOrById(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            #expect(try await store.read { tx in try tx.logoutPoll(since: t0, afterID: nil) } == LogoutPoll(logouts: [], newestID: 0))
            clock.set(t0 + 100)
            let first = try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            clock.set(t0 + 40)  // the next node's clock is behind by a minute
            let behind = try await store.write { tx in try tx.revokeTokens(of: fixture.bob.id) }
            #expect(behind.id > first.id)
            let poll = try await store.read { tx in
                (try tx.logoutPoll(since: t0 + 95, afterID: first.id), try tx.logoutPoll(since: t0 + 95, afterID: nil),
                 try tx.logoutPoll(since: t0 + 200, afterID: behind.id))
            }
            #expect(poll.0 == LogoutPoll(logouts: [behind, first], newestID: behind.id), "by its id, oldest first")
            #expect(poll.1 == LogoutPoll(logouts: [first], newestID: behind.id), "by time only")
            #expect(poll.2 == LogoutPoll(logouts: [], newestID: behind.id))
            // A logout that both conditions name comes once.
            let both = try await store.read { tx in try tx.logoutPoll(since: t0, afterID: 0) }
            #expect(both == LogoutPoll(logouts: [behind, first], newestID: behind.id))
        }
    }

    /// A user's session epoch is the one their latest logout started, also once its record is
    /// pruned: a node that lost track of logouts reads it to know which credentials were revoked.
    /// Users that do not exist are left out; any number of users is read at once.
    @Test(arguments: Backend.allCases) func sessionEpochsAreReadForManyUsersAndOutliveTheLogoutRecords(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let (alice, bob) = (fixture.alice.id, fixture.bob.id)
            @Sendable func epochs(_ users: [UserID]) async throws -> [UserID: SessionEpoch] {
                try await store.read { tx in try tx.sessionEpochs(of: users) }
            }
            #expect(try await epochs([]) == [:])
            #expect(try await epochs([alice, bob]) == [alice: SessionEpoch(0), bob: SessionEpoch(0)])
            clock.set(t0)
            let first = try await store.write { tx in try tx.revokeTokens(of: alice) }
            let second = try await store.write { tx in try tx.revokeTokens(of: alice) }
            #expect(second.epoch == SessionEpoch(2))
            // Every logout record pruned: the epochs stay.
            #expect(try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 15, limit: 100) } == 2)
            #expect(try await store.read { tx in try tx.logouts(since: t0 - 1) }.isEmpty)
            // 2 000 ids that name nobody, the two users, and Alice again.
            let asked = (0..<2_000).map { UserID(Int64(900_000 + $0)) } + [bob, alice, alice]
            #expect(try await epochs(asked) == [alice: second.epoch, bob: SessionEpoch(0)])
            #expect(first.epoch == SessionEpoch(1))
        }
    }

    /// A user keeps their newest `maxTokensPerUser` tokens: a login past that deletes the oldest
    /// (logins are not throttled once they succeed, and each added a row kept until it expired).
    /// Another user's tokens stay.
    /// A user keeps the `maxTokensPerUser` tokens used last: logins past that delete the ones unused
    /// longest (the oldest among those never used since their login), whatever their age. The
    /// first token here, used after the others were made, survives them all (by age it was the
    /// first to go: a script's hundred logins logged a phone in use out; a review, 2026-12-07).
    @Test(arguments: Backend.allCases) func aUserKeepsTheTokensUsedLast(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            @Sendable func hash(_ n: Int) -> [UInt8] { Array(repeating: UInt8(n % 256), count: 31) + [UInt8(n / 256)] }
            let bobs = Array(repeating: UInt8(0xB0), count: 32)
            let phone = Array(repeating: UInt8(0xF0), count: 32)
            let extra = 3, total = maxTokensPerUser + extra
            try await store.write { tx in
                try tx.insertToken(hash: bobs, for: fixture.bob.id, createdAt: t0, expiresAt: nil)
                try tx.insertToken(hash: phone, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
                for n in 0..<total {
                    // The phone is in use while the others are made (its last use noted now and then).
                    if n == 1 { try tx.touchToken(hash: phone, at: t0 + 3_600) }
                    try tx.insertToken(hash: hash(n), for: fixture.alice.id, createdAt: t0 + Double(n), expiresAt: nil)
                }
            }
            let valid = try await store.write { tx in
                try (0..<total).map { try tx.validTokenUser(tokenHash: hash($0), now: t0 + 7_200) != nil }
            }
            // The phone's token and the newest `maxTokensPerUser - 1` of the others.
            #expect(valid == Array(repeating: false, count: extra + 1) + Array(repeating: true, count: maxTokensPerUser - 1))
            #expect(try await store.write { tx in try tx.validTokenUser(tokenHash: phone, now: t0 + 7_200) }?.user == fixture.alice.id)
            #expect(try await store.write { tx in try tx.validTokenUser(tokenHash: bobs, now: t0) }?.user == fixture.bob.id)
        }
    }

    @Test(arguments: Backend.allCases) func loginAttemptsStopAtTheLimitWithinTheWindow(_ backend: Backend) async throws
    {
        try await withStore(backend) { store in
            let reserved = try await store.write { tx in
                try (0..<4).map { second in
                    try tx.reserveLoginAttempt(key: "ip:1", at: t0 + Double(second), window: 60, limit: 3)
                }
            }
            #expect(reserved == [true, true, true, false])
            #expect(
                try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:2", at: t0, window: 60, limit: 3) },
                "keys are counted separately")
            // The first attempt (t0) leaves the window at t0 + 60: one slot frees up.
            let later = try await store.write { tx in
                (
                    try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 60, window: 60, limit: 3),
                    try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 60.5, window: 60, limit: 3)
                )
            }
            #expect(later == (true, false))
        }
    }

    /// Attempts recorded more than a window after the one asked for (the clock was set back an
    /// hour since) no longer count: they kept the key locked out for the whole hour.
    @Test(arguments: Backend.allCases) func attemptsFromBeforeAClockSetBackDoNotLockTheKeyOut(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let reserved = try await store.write { tx in
                try (0..<3).map { second in try tx.reserveLoginAttempt(key: "ip:1", at: t0 + Double(second), window: 60, limit: 3) }
            }
            #expect(reserved == [true, true, true])
            #expect(try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 30, window: 60, limit: 3) } == false)
            // A node an hour ahead does not clear them for the others (a reservation deleted the
            // attempts behind its own time).
            _ = try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 3600, window: 60, limit: 3) }
            #expect(try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 30, window: 60, limit: 3) } == false)
            // A node a little behind still counts them (within a window ahead of it).
            #expect(try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 - 30, window: 60, limit: 3) } == false)
            let afterTheStep = try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 - 3600, window: 60, limit: 3) }
            #expect(afterTheStep, "an hour back, the attempts recorded before the step do not count")
            // Not deleted: back at the right time (another node's clock), they count again.
            #expect(try await store.write { tx in try tx.reserveLoginAttempt(key: "ip:1", at: t0 + 30, window: 60, limit: 3) } == false)
        }
    }

    /// Session records go in chunks of at most `limit` rows, attempts first, then logouts; a call
    /// that deletes fewer than `limit` has left nothing older.
    @Test(arguments: Backend.allCases) func sessionRecordsArePrunedInChunks(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            try await store.write { tx in
                for n in 0..<5 { _ = try tx.reserveLoginAttempt(key: "k\(n)", at: t0 + Double(n), window: 60, limit: 9) }
                _ = try tx.reserveLoginAttempt(key: "late", at: t0 + 100, window: 60, limit: 9)
            }
            clock.set(t0 + 1)
            _ = try await store.write { tx in try tx.revokeTokens(of: fixture.alice.id) }
            clock.set(t0 + 2)
            _ = try await store.write { tx in try tx.revokeTokens(of: fixture.bob.id) }
            try await store.write { tx in  // asked for and never redeemed
                try tx.insertTicket(hash: Array(repeating: 7, count: 32), for: fixture.bob.id, epoch: SessionEpoch(1), expiresAt: t0 + 30)
                try tx.insertTicket(hash: Array(repeating: 8, count: 32), for: fixture.bob.id, epoch: SessionEpoch(1), expiresAt: t0 + 90)
            }
            var chunks: [Int] = []
            for _ in 0..<4 {
                chunks.append(try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 50, limit: 3) })
            }
            #expect(chunks == [3, 3, 2, 0], "5 attempts, 2 logouts and the ticket that expired first, 3 at a time")
            let kept = try await store.write { tx in try tx.consumeTicket(hash: Array(repeating: 8, count: 32), now: t0 + 60) }
            #expect(kept?.user == fixture.bob.id, "a ticket still valid is kept")
            #expect(try await store.read { tx in try tx.logouts(since: t0) }.isEmpty)
            let late = try await store.write { tx in try tx.reserveLoginAttempt(key: "late", at: t0 + 101, window: 60, limit: 1) }
            #expect(!late, "the newer attempt is kept")
        }
    }

    /// Every login adds an API token; those that expired before the cutoff go with the session
    /// records (revoked or not), those still valid or with no expiry stay and still authenticate.
    @Test(arguments: Backend.allCases) func expiredTokensArePrunedWithTheSessionRecords(_ backend: Backend) async throws {
        let clock = ManualClock()
        clock.set(t0 + 200)  // the logout below is recorded after every cutoff here
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let expired = Array(repeating: UInt8(1), count: 32), expiredRevoked = Array(repeating: UInt8(2), count: 32)
            let valid = Array(repeating: UInt8(3), count: 32), forever = Array(repeating: UInt8(4), count: 32)
            let expiredLater = Array(repeating: UInt8(5), count: 32)
            try await store.write { tx in
                try tx.insertToken(hash: expiredRevoked, for: fixture.bob.id, createdAt: t0 - 100, expiresAt: t0 + 5)
                _ = try tx.revokeTokens(of: fixture.bob.id)
                try tx.insertToken(hash: expired, for: fixture.alice.id, createdAt: t0 - 100, expiresAt: t0 + 10)
                try tx.insertToken(hash: expiredLater, for: fixture.alice.id, createdAt: t0 - 100, expiresAt: t0 + 60)
                try tx.insertToken(hash: valid, for: fixture.alice.id, createdAt: t0, expiresAt: t0 + 1_000)
                try tx.insertToken(hash: forever, for: fixture.alice.id, createdAt: t0, expiresAt: nil)
            }
            let first = try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 50, limit: 1) }
            let rest = try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 50, limit: 100) }
            #expect([first, rest] == [Int](arrayLiteral: 1, 1), "the two tokens that expired before the cutoff, one per chunk")
            #expect(try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 50, limit: 100) } == 0)
            let kept = try await store.read { tx in
                (try tx.user(tokenHash: valid, now: t0 + 100), try tx.user(tokenHash: forever, now: t0 + 100))
            }
            #expect(kept.0?.user == fixture.alice)
            #expect(kept.1?.user == fixture.alice)
            #expect(
                try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 61, limit: 100) } == 1,
                "the token that expired after the first cutoff goes at a later one")
        }
    }

    @Test(arguments: Backend.allCases) func aReleasedAttemptFreesItsSlot(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let outcome = try await store.write { tx in
                let first = try tx.reserveLoginAttempt(key: "user@x", at: t0, window: 60, limit: 2)
                let second = try tx.reserveLoginAttempt(key: "user@x", at: t0 + 1, window: 60, limit: 2)
                let refused = try tx.reserveLoginAttempt(key: "user@x", at: t0 + 2, window: 60, limit: 2)
                try tx.releaseLoginAttempt(key: "user@x", at: t0 + 1)
                let afterRelease = try tx.reserveLoginAttempt(key: "user@x", at: t0 + 3, window: 60, limit: 2)
                return [first, second, refused, afterRelease]
            }
            #expect(outcome == [true, true, false, true])
            #expect(try await store.write { tx in try tx.pruneSessionRecords(before: t0 + 2, limit: 100) } == 1)
        }
    }

    @Test(arguments: Backend.allCases) func concurrentReservationsNeverExceedTheLimit(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let granted = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<30 {
                    group.addTask {
                        try await store.write { tx in
                            try tx.reserveLoginAttempt(
                                key: "ip:9", at: t0 + Double(index) / 1000, window: 60, limit: 5)
                        }
                    }
                }
                return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
            }
            #expect(granted == 5)
        }
    }
}
