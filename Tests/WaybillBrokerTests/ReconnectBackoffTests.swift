import Testing

@testable import WaybillRedis

struct ReconnectBackoffTests {
    @Test func doublesFrom100MillisecondsUpToTwoSecondsAndResets() {
        var backoff = ReconnectBackoff()
        let delays = (0..<8).map { _ in backoff.nextDelay() }
        #expect(delays == [100, 200, 400, 800, 1600, 2000, 2000, 2000].map { Duration.milliseconds($0) })
        backoff.reset()
        #expect(backoff.nextDelay() == .milliseconds(100))
    }

    @Test func manyFailuresDoNotOverflow() {
        var backoff = ReconnectBackoff()
        for _ in 0..<10_000 { _ = backoff.nextDelay() }
        #expect(backoff.nextDelay() == .seconds(2))
    }
}

struct RedisHeartbeatTests {
    @Test func pingsEverySecondAndGivesUpAfterTwoSilentSeconds() {
        let start = ContinuousClock.now
        var heartbeat = RedisHeartbeat(now: start)
        #expect(heartbeat.check(at: start + .milliseconds(500)) == .none)
        #expect(heartbeat.check(at: start + .seconds(1)) == .ping)
        #expect(heartbeat.check(at: start + .milliseconds(1500)) == .none)
        #expect(heartbeat.check(at: start + .milliseconds(1999)) == .none)
        #expect(heartbeat.check(at: start + .seconds(2)) == .reconnect)
    }

    @Test func anyReplyKeepsTheConnectionAlive() {
        let start = ContinuousClock.now
        var heartbeat = RedisHeartbeat(now: start)
        var actions: [RedisHeartbeat.Action] = []
        for tenth in 1...50 {
            let now = start + .milliseconds(100 * tenth)
            if tenth % 10 == 5 { heartbeat.heard(at: now) }  // the pong, half a second after each ping
            actions.append(heartbeat.check(at: now))
        }
        #expect(!actions.contains(.reconnect))
        #expect(actions.filter { $0 == .ping }.count == 5)
    }

    /// Our own stall is not Redis's silence: after 3 s in which nothing was asked, the heartbeat
    /// pings first and gives up only when that PING has gone a whole interval without an answer.
    @Test func aStallWithNoPingOutPingsBeforeGivingUp() {
        let start = ContinuousClock.now
        var heartbeat = RedisHeartbeat(now: start)
        #expect(heartbeat.check(at: start + .milliseconds(900)) == .none)
        // The thread was held from 0.9 s to 3.9 s: its 1 s PING never went out.
        #expect(heartbeat.check(at: start + .milliseconds(3900)) == .ping)
        #expect(heartbeat.check(at: start + .milliseconds(4100)) == .none)
        #expect(heartbeat.check(at: start + .milliseconds(4899)) == .none)
        #expect(heartbeat.check(at: start + .milliseconds(4900)) == .reconnect)
    }

    @Test func aStallAnsweredAfterwardsKeepsTheConnection() {
        let start = ContinuousClock.now
        var heartbeat = RedisHeartbeat(now: start)
        #expect(heartbeat.check(at: start + .seconds(5)) == .ping)
        heartbeat.heard(at: start + .milliseconds(5001))
        #expect(heartbeat.check(at: start + .milliseconds(5500)) == .none)
        #expect(heartbeat.check(at: start + .seconds(6)) == .ping)
        heartbeat.heard(at: start + .milliseconds(6001))
        #expect(heartbeat.check(at: start + .seconds(7)) == .ping)
    }

    /// The first unanswered PING counts, not the newest: a frozen Redis is given up on at the same
    /// time however many PINGs went out meanwhile.
    @Test func theFirstUnansweredPingSetsTheDeadline() {
        let start = ContinuousClock.now
        var heartbeat = RedisHeartbeat(now: start, interval: .seconds(1), timeout: .seconds(3))
        #expect(heartbeat.check(at: start + .seconds(1)) == .ping)
        #expect(heartbeat.check(at: start + .milliseconds(2500)) == .ping)
        #expect(heartbeat.check(at: start + .milliseconds(2999)) == .none)
        #expect(heartbeat.check(at: start + .seconds(3)) == .reconnect)  // the newest waited only 0.5 s
    }
}
