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
}
