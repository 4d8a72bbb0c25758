import Foundation
import Testing
import WaybillBroker
import WaybillDomain
import WaybillRealtime
import WaybillStorage
import WaybillTesting

/// `minimumRoundInterval`: with several nodes the leader lets commits gather between rounds, so
/// one store read and one message carry all of them instead of one round per commit.
@Suite(.timeLimit(.minutes(1)))
struct OutboxRelayRoundTests {
    @Test func commitsDuringTheIntervalGoOutTogetherInTheNextRound() async throws {
        try await withStore { original in
            let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
            let configuration = OutboxRelay.Configuration(
                pollInterval: .seconds(3600), minimumRoundInterval: .milliseconds(5))
            let old = try await original.append(2)
            let (relay, running) = try await OutboxRelayRewindTests.quietRelay(
                store, broker, clock, published: old, configuration: configuration)
            defer { running.cancel() }
            let before = broker.batchSizes.count

            let first = try await store.append(1)
            relay.committed(first)
            #expect(await eventually { broker.batchSizes.count == before + 1 }, "a commit after a quiet spell goes at once")
            // The round that published it started less than 5 ms ago on the relay's clock.
            let second = try await store.append(1)
            relay.committed(second)
            let third = try await store.append(1)
            relay.committed(third)
            try await Task.sleep(for: .milliseconds(200))
            #expect(broker.batchSizes.count == before + 1, "nothing more before the interval is over")

            await clock.advance(by: .milliseconds(5))
            #expect(await eventually { broker.publishedIDs.count == old.count + 3 })
            #expect(Array(broker.batchSizes.dropFirst(before)) == [1, 2], "the two later commits in one message")
            #expect(broker.publishedIDs == (old + first + second + third).map(\.id))
            running.cancel()
            await running.value
        }
    }

    /// Zero, the default (one process): every commit wakes a round at once.
    @Test func withoutAnIntervalEachCommitGoesAtOnce() async throws {
        try await withStore { original in
            let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
            let old = try await original.append(2)
            let (relay, running) = try await OutboxRelayRewindTests.quietRelay(
                store, broker, clock, published: old, configuration: .init(pollInterval: .seconds(3600)))
            defer { running.cancel() }
            for _ in 0..<2 {
                let mine = try await store.append(1)
                relay.committed(mine)
                #expect(await eventually { broker.publishedIDs.last == mine.last?.id })
            }
            running.cancel()
            await running.value
        }
    }
}

/// A cursor not yet saved must not stretch the wait for the next poll: another node's commits are
/// found only by the poll, and with `pollInterval` 10 ms and `persistInterval` 100 ms (the server's
/// settings on a shared database) a follower's commit once waited for the save (up to 100 ms)
/// instead of the poll.
@Suite(.timeLimit(.minutes(1)))
struct OutboxRelayPollTests {
    @Test func anotherNodesCommitIsFoundAtThePollWhileTheCursorWaitsToBeSaved() async throws {
        try await withStore { original in
            let store = SwitchableStore(original), broker = ScriptedBroker(), clock = TestClock()
            var configuration = OutboxRelay.Configuration(pollInterval: .milliseconds(10))
            // A save interval no 10 ms step of this test can reach, however the setup's steps fell.
            configuration.persistInterval = .seconds(1)
            let old = try await original.append(2)
            let (relay, running) = try await OutboxRelayRewindTests.quietRelay(
                store, broker, clock, published: old, configuration: configuration)
            defer { running.cancel() }

            // Two of this node's commits at one instant: the second round's cursor is not saved
            // (the last save is less than `persistInterval` ago).
            for _ in 0..<2 {
                let mine = try await store.append(1)
                relay.committed(mine)
                #expect(await eventually { broker.publishedIDs.last == mine.last?.id })
            }
            // Let the timer armed before these rounds (a poll's) fire first: the wait that follows
            // arms its own.
            #expect(await eventually { !clock.deadlines.isEmpty }, "the relay waits on the clock")
            await clock.advance(by: .milliseconds(10))
            try await Task.sleep(for: .milliseconds(100))
            #expect(try await store.read { tx in try tx.relayedThrough() } != broker.publishedIDs.last)

            // Another node's commit: nothing hands it over, only the poll reads it.
            let theirs = try await original.append(1)
            var advanced = Duration.zero
            while broker.publishedIDs.last != theirs.last?.id, advanced < .milliseconds(60) {
                #expect(await eventually { !clock.deadlines.isEmpty }, "the relay waits on the clock")
                await clock.advance(by: .milliseconds(10))
                advanced += .milliseconds(10)
                _ = await eventually(timeout: .milliseconds(300)) { broker.publishedIDs.last == theirs.last?.id }
            }
            #expect(broker.publishedIDs.last == theirs.last?.id, "found by a poll, within 60 ms on the relay's clock")
            running.cancel()
            await running.value
        }
    }
}

/// A cursor save that fails is tried again later and is no relay failure: the events are out. It
/// was counted as one, with a 200 ms backoff (every node's delivery paused) and a backlog read.
@Suite(.timeLimit(.minutes(1)))
struct OutboxRelayCursorSaveTests {
    @Test func aFailedCursorSaveDoesNotPausePublishing() async throws {
        try await withStore { original in
            let counting = CountingStore(original)
            let store = SwitchableStore(counting), broker = ScriptedBroker(), clock = TestClock()
            let old = try await original.append(2)
            let (relay, running) = try await OutboxRelayRewindTests.quietRelay(
                store, broker, clock, published: old, configuration: .init(pollInterval: .seconds(3600)))
            defer { running.cancel() }

            counting.failWrites(1)
            let writes = counting.writes
            let first = try await original.append(1)
            relay.committed(first)
            #expect(await eventually { broker.publishedIDs.last == first.last?.id })
            // The save, due `persistInterval` later, fails.
            #expect(
                await eventually {
                    await clock.advance(by: .milliseconds(100))
                    return counting.writes > writes
                }, "the cursor save was tried")

            // The next commit goes out at once: no backoff on the relay's (standing) clock.
            let second = try await original.append(1)
            relay.committed(second)
            #expect(await eventually { broker.publishedIDs.last == second.last?.id })  // a backoff would never end
            #expect(broker.publishedIDs == (old + first + second).map(\.id), "nothing twice: no backlog read")
            // And the cursor is saved at a later round.
            #expect(
                try await eventually {
                    await clock.advance(by: .milliseconds(100))
                    return try await store.read { tx in try tx.relayedThrough() } == second.last?.id
                })
            running.cancel()
            await running.value
        }
    }
}
