import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

struct LogoutWindowTests {
    static let t = Date(timeIntervalSince1970: 1_000_000)

    static func logout(_ user: UserID, at: Date, epoch: Int64 = 1) -> Logout {
        Logout(userID: user, at: at, epoch: SessionEpoch(epoch))
    }

    @Test func eachLogoutIsActedOnOnceAcrossOverlappingPolls() {
        var window = LogoutWindow(overlap: 5)
        let a = Self.logout(1, at: Self.t), b = Self.logout(2, at: Self.t + 1)
        #expect(window.since(now: Self.t + 2) == Self.t - 3)
        #expect(window.received([a], now: Self.t + 1) == [a])
        #expect(window.received([a, b], now: Self.t + 2) == [b])
        #expect(window.received([a, b], now: Self.t + 3).isEmpty)
    }

    /// A watcher whose polls fail from its start: the first answer reaches back to the start, and
    /// an answer long after it is a gap like any other.
    @Test func theFirstWindowReachesBackToTheStart() {
        var window = LogoutWindow(overlap: 5)
        window.started(now: Self.t)
        #expect(window.since(now: Self.t + 600) == Self.t - 5)
        #expect(window.lostTrack(now: Self.t + 600, after: 1800) == false)
        #expect(window.lostTrack(now: Self.t + 3600, after: 1800))
        #expect(window.received([], now: Self.t + 3600).isEmpty)
        #expect(window.lostTrack(now: Self.t + 3601, after: 1800) == false)
    }

    /// Polls failed for longer than the overlap: the next window reaches back to the last poll that
    /// got an answer, so a logout made meanwhile is still acted on.
    @Test func afterFailedPollsTheWindowStartsAtTheLastAnsweredPoll() {
        var window = LogoutWindow(overlap: 5)
        #expect(window.received([], now: Self.t).isEmpty)
        let meanwhile = Self.logout(1, at: Self.t + 1)
        // Polls at t+0.25 … t+7 failed (no `received`); the one at t+8 answers.
        #expect(window.since(now: Self.t + 8) == Self.t - 5)
        #expect(window.received([meanwhile], now: Self.t + 8) == [meanwhile])
        #expect(window.since(now: Self.t + 9) == Self.t + 3)
    }

    @Test func aUserWhoLogsOutAgainIsActedOnAgain() {
        var window = LogoutWindow(overlap: 5)
        let first = Self.logout(1, at: Self.t), second = Self.logout(1, at: Self.t + 2, epoch: 2)
        #expect(window.received([first], now: Self.t) == [first])
        #expect(window.received([first, second], now: Self.t + 2) == [second])
    }

    /// One act per user, for the logout that started the highest epoch: it revoked what the other did.
    @Test func twoLogoutsOfOneUserInOnePollActOnceForTheHigherEpoch() {
        var window = LogoutWindow(overlap: 5)
        let first = Self.logout(3, at: Self.t), second = Self.logout(3, at: Self.t + 1, epoch: 2)
        #expect(window.received([first, second], now: Self.t + 1) == [second])
        // Nodes' clocks differ: the later epoch may carry the earlier time.
        var skewed = LogoutWindow(overlap: 5)
        let ahead = Self.logout(3, at: Self.t, epoch: 4), behind = Self.logout(3, at: Self.t + 1, epoch: 3)
        #expect(skewed.received([ahead, behind], now: Self.t + 1) == [ahead])
    }
}

extension LogoutWindowTests {
    /// A node whose clock runs behind this one's by more than the overlap stamps its logout before
    /// every window; the poll finds it by its id (above the newest the last poll saw), acts on it
    /// once, and does not ask for it again.
    @Test func aLogoutStampedBeforeTheWindowIsFoundByItsId() {
        var window = LogoutWindow(overlap: 5)
        #expect(window.newestID == nil, "the first poll reads by time only")
        #expect(window.received(LogoutPoll(logouts: [], newestID: 7), now: Self.t).isEmpty)
        #expect(window.newestID == 7)
        let behind = Logout(userID: 1, at: Self.t - 60, epoch: SessionEpoch(1), id: 8)
        #expect(window.since(now: Self.t + 1) == Self.t - 5)
        #expect(window.received(LogoutPoll(logouts: [behind], newestID: 8), now: Self.t + 1) == [behind])
        #expect(window.newestID == 8)
        #expect(window.received(LogoutPoll(logouts: [], newestID: 8), now: Self.t + 2).isEmpty)
        // The store was restored: its ids start lower again, and the next poll asks from there.
        #expect(window.received(LogoutPoll(logouts: [], newestID: 3), now: Self.t + 3).isEmpty)
        #expect(window.newestID == 3)
        #expect(window.afterID(now: Self.t + 4) == 3)
    }

    /// On PostgreSQL a logout's id is taken when it is inserted, so it can commit after a logout with
    /// a higher id was read. The polls ask from the newest id of a poll `overlap` ago, so a late
    /// commit stamped before the window (its node's clock runs behind) is still found, and a logout
    /// they return again is acted on once.
    @Test func aLogoutCommittedAfterAHigherIdWasReadIsFoundAndActedOnOnce() {
        var window = LogoutWindow(overlap: 5)
        #expect(window.afterID(now: Self.t) == nil)
        #expect(window.received(LogoutPoll(logouts: [], newestID: 99), now: Self.t).isEmpty)
        let quick = Logout(userID: 1, at: Self.t + 1, epoch: SessionEpoch(1), id: 101)
        #expect(window.afterID(now: Self.t + 1) == 99)
        #expect(window.received(LogoutPoll(logouts: [quick], newestID: 101), now: Self.t + 1) == [quick])
        // Inserted before `quick`, committed after the poll that read it, stamped a minute back.
        let late = Logout(userID: 2, at: Self.t - 60, epoch: SessionEpoch(1), id: 100)
        #expect(window.afterID(now: Self.t + 2) == 99, "still from the poll before `quick` was read")
        #expect(window.received(LogoutPoll(logouts: [late, quick], newestID: 101), now: Self.t + 2) == [late])
        #expect(window.received(LogoutPoll(logouts: [late, quick], newestID: 101), now: Self.t + 3).isEmpty)
        // Past the overlap the polls ask from 101: neither comes back, and neither is acted on again.
        #expect(window.afterID(now: Self.t + 7) == 101)
        #expect(window.received(LogoutPoll(logouts: [], newestID: 101), now: Self.t + 7).isEmpty)
    }
}

@Suite(.timeLimit(.minutes(1)))
struct SessionWatcherTests {
    /// A running watcher's test clock and what it has reported so far.
    final class Polls: Sendable {
        let clock = TestClock()
        let reported = Mutex<[Logout]>([])

        var logouts: [Logout] { reported.withLock { $0 } }

        /// The first poll has answered: it sleeps until the next.
        func firstAnswered() async -> Bool { await eventually { clock.sleeperCount > 0 } }

        /// Poll by poll until `expected` is reported: a first poll that read before the commit may arm
        /// its next sleep only after one advance (a busy machine), and would wait for ever for a second.
        func untilReported(_ expected: [Logout]) async -> Bool {
            await eventually {
                await clock.advance(by: .milliseconds(250))
                return logouts == expected
            }
        }

        /// Four more polls: any that would act again has had its chance.
        func pollMore() async { for _ in 0..<4 { await clock.advance(by: .milliseconds(250)) } }
    }

    /// Runs `body` with a watcher polling a fresh store (stamping logouts by `storeClock`) on a test
    /// clock, and a user to log out; stops the watcher after.
    static func withWatcher(
        storeClock: @escaping @Sendable () -> Date = { Date() },
        _ body: (SQLiteOrderStore, User, SessionWatcher, Polls) async throws -> Void
    ) async throws {
        try await withStore(clock: storeClock) { store in
            let user = try await store.write { tx in
                try tx.insertUser(companyID: nil, role: .dispatcher, email: "a@example.com", name: "A", passwordHash: "x")
            }
            let polls = Polls()
            let watcher = SessionWatcher(store: store, now: { Date() }, clock: polls.clock, logger: Fixtures.logger) {
                logout in polls.reported.withLock { $0.append(logout) }
            }
            let running = Task { await watcher.run() }
            defer { running.cancel() }
            try await body(store, user, watcher, polls)
            running.cancel()
            await running.value
        }
    }

    /// A poll that answers after none did for longer than logouts are kept (a node cut off from the
    /// store for an hour) says so once: logouts made meanwhile may have been pruned, and the server
    /// closes every socket so each signs in again. A node that kept up never does.
    @Test func aPollAfterAGapLongerThanLogoutsAreKeptSaysSoOnce() async throws {
        try await withStore { store in
            let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
            let lost = Mutex(0), clock = TestClock()
            let watcher = SessionWatcher(
                store: store, now: { now.withLock { $0 } }, clock: clock, logger: Fixtures.logger,
                lostTrackAfter: .seconds(1800), lostTrack: { lost.withLock { $0 += 1 } }
            ) { _ in }
            let running = Task { await watcher.run() }
            defer { running.cancel() }
            #expect(await eventually { clock.sleeperCount > 0 }, "the first poll answered")
            for _ in 0..<4 {  // polls a minute apart: keeping up
                now.withLock { $0 += 60 }
                await clock.advance(by: .milliseconds(250))
            }
            #expect(lost.withLock { $0 } == 0)
            now.withLock { $0 += 3600 }  // the next answer comes an hour after the last
            #expect(await eventually {
                await clock.advance(by: .milliseconds(250))
                return lost.withLock { $0 } == 1
            })
            for _ in 0..<4 { await clock.advance(by: .milliseconds(250)) }
            #expect(lost.withLock { $0 } == 1, "once")
            running.cancel()
            await running.value
        }
    }

    /// A logout recorded through another handle on the same file (another node) reaches the callback once.
    @Test func aLogoutRecordedByAnotherNodeIsReportedOnce() async throws {
        try await Self.withWatcher { store, user, _, polls in
            let logout = try await store.write { tx in try tx.revokeTokens(of: user.id) }
            #expect(await polls.untilReported([logout]), "with its epoch")
            await polls.pollMore()  // later polls see it again: ignored
            #expect(polls.logouts == [logout])
        }
    }

    /// The watcher's task starts well after the watcher was made (the server makes it before it
    /// opens its listener; a starved pool starts the task late), and another node made a logout in
    /// between: the first window reaches back to when the watcher was made, so it is reported.
    @Test func aLogoutMadeBeforeTheWatchersTaskStartedIsReported() async throws {
        let made = Date(timeIntervalSince1970: 1_800_000_000)
        try await withStore(clock: { made + 1 }) { store in
            let user = try await store.write { tx in
                try tx.insertUser(companyID: nil, role: .dispatcher, email: "a@example.com", name: "A", passwordHash: "x")
            }
            let now = Mutex(made), polls = Polls()
            let watcher = SessionWatcher(
                store: store, now: { now.withLock { $0 } }, clock: polls.clock, logger: Fixtures.logger
            ) { logout in polls.reported.withLock { $0.append(logout) } }
            let logout = try await store.write { tx in try tx.revokeTokens(of: user.id) }  // stamped made + 1
            now.withLock { $0 = made + 10 }  // the task starts 10 s later: past the 5 s overlap
            let running = Task { await watcher.run() }
            defer { running.cancel() }
            #expect(await polls.untilReported([logout]))
            await polls.pollMore()
            #expect(polls.logouts == [logout])
            running.cancel()
            await running.value
        }
    }

    /// A logout this node made and acted on at once (`actedOn`, with what the store returned) is not
    /// acted on again when its poll reads it: the store returns it with the same id.
    @Test func aLogoutThisNodeActedOnIsNotReportedAgain() async throws {
        try await Self.withWatcher { store, user, watcher, polls in
            #expect(await polls.firstAnswered())
            let mine = try await store.write { tx in try tx.revokeTokens(of: user.id) }
            watcher.actedOn(mine)
            let other = try await store.write { tx in try tx.revokeTokens(of: user.id) }  // a second, elsewhere
            #expect(await polls.untilReported([other]))
            await polls.pollMore()
            #expect(polls.logouts == [other], "the one acted on here never")
        }
    }

    /// The node that made the logout has a clock a minute behind this one's (the store stamps its
    /// time): the logout is before every window of this node's polls, and is reported all the same,
    /// once (before, never: the user's sockets on this node stayed open).
    @Test func aLogoutStampedByANodeWhoseClockIsBehindIsReported() async throws {
        try await Self.withWatcher(storeClock: { Date() - 60 }) { store, user, _, polls in
            // The first poll has answered (it learns the newest id) before the logout is made.
            #expect(await polls.firstAnswered())
            let logout = try await store.write { tx in try tx.revokeTokens(of: user.id) }
            #expect(await polls.untilReported([logout]))
            await polls.pollMore()
            #expect(polls.logouts == [logout])
        }
    }
}
