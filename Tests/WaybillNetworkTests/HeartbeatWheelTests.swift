import Testing

@testable import WaybillNetwork

struct HeartbeatWheelTests {
    let a = SocketID(1)
    let b = SocketID(2)

    @Test func socketIsPingedOneIntervalAfterJoiningThenEveryInterval() {
        var wheel = HeartbeatWheel(interval: 3)
        wheel.add(a)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.ping(a)])
        wheel.pongReceived(from: a)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.ping(a)])
    }

    @Test func silentSocketIsDroppedOnItsNextTurnAndForgotten() {
        var wheel = HeartbeatWheel(interval: 2)
        wheel.add(a)
        wheel.add(b)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.ping(a), .ping(b)])
        wheel.pongReceived(from: b)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.drop(a), .ping(b)])
        #expect(wheel.count == 1)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.drop(b)])
        #expect(wheel.count == 0)
    }

    /// A socket that owes a pong but whose ping may not have reached its peer yet waits another
    /// interval, without a second ping; once the server says no, it is dropped.
    @Test func aSocketWhosePingMayNotHaveArrivedWaitsForItsPong() {
        var wheel = HeartbeatWheel(interval: 2)
        wheel.add(a)
        wheel.add(b)
        #expect(wheel.tick() == [])
        #expect(wheel.tick(mayWait: { _ in true }) == [.ping(a), .ping(b)])  // not asked: nothing owed
        #expect(wheel.tick() == [])
        var asked: [SocketID] = []
        #expect(wheel.tick(mayWait: { asked.append($0); return $0 == a }) == [.drop(b)])
        #expect(asked == [a, b])
        #expect(wheel.tick() == [])
        #expect(wheel.tick(mayWait: { _ in true }) == [])  // still owes: waits again
        wheel.pongReceived(from: a)
        #expect(wheel.tick() == [])
        #expect(wheel.tick() == [.ping(a)])
        #expect(wheel.tick() == [])
        #expect(wheel.tick(mayWait: { _ in false }) == [.drop(a)])
        #expect(wheel.count == 0)
    }

    /// One ping is waited for at most `maxExtraTurns` more intervals, however long the server says
    /// it may still be on its way; a pong starts the count over.
    @Test func aPingIsWaitedForABoundedNumberOfTurns() {
        var wheel = HeartbeatWheel(interval: 1)
        wheel.add(a)
        #expect(wheel.tick() == [.ping(a)])
        for _ in 0..<Int(HeartbeatWheel.maxExtraTurns) { #expect(wheel.tick(mayWait: { _ in true }) == []) }
        wheel.pongReceived(from: a)
        #expect(wheel.tick(mayWait: { _ in true }) == [.ping(a)])
        for _ in 0..<Int(HeartbeatWheel.maxExtraTurns) { #expect(wheel.tick(mayWait: { _ in true }) == []) }
        #expect(wheel.tick(mayWait: { _ in true }) == [.drop(a)])
        #expect(wheel.count == 0)
    }

    @Test func removedSocketsAndStrayPongsAreIgnored() {
        var wheel = HeartbeatWheel(interval: 1)
        wheel.add(a)
        wheel.add(a)  // twice: still one entry
        wheel.pongReceived(from: b)  // never added
        #expect(wheel.count == 1)
        #expect(wheel.tick() == [.ping(a)])
        wheel.remove(a)
        #expect(wheel.tick() == [])
        #expect(wheel.count == 0)
    }

    /// Sockets that join in different seconds are spread over the buckets: each tick visits a share.
    @Test func socketsJoiningOverTimeAreSpreadOverTheTicks() {
        var wheel = HeartbeatWheel(interval: 4)
        for second in 0..<4 {
            for i in 0..<10 { wheel.add(SocketID(UInt64(second * 10 + i))) }
            _ = wheel.tick()
        }
        let perTick = (0..<4).map { _ in wheel.tick().count }
        #expect(perTick == [10, 10, 10, 10])
    }

    /// The server's rule for a socket that owes a pong (`ServerCore.pingMayNotHaveArrived`), on plain
    /// numbers: it waits while the ping is on its way and the peer reads, and for one interval after
    /// the ping was acknowledged, but only for a ping that had a backlog ahead of it.
    @Test func aPingBehindABacklogIsWaitedForWhileThePeerReads() {
        let wait = ServerCore.pingMayNotHaveArrived
        // Not all in the kernel yet: waits while the peer acknowledges more.
        #expect(wait(nil, false, 100, 200))
        #expect(!wait(nil, true, 200, 200))
        // On its way behind a backlog: waits while the peer reads, not when it stopped.
        #expect(wait(1_000_000, true, 100, 500_000))
        #expect(!wait(1_000_000, true, 500_000, 500_000))
        // Acknowledged since the last turn: one interval more; acknowledged before it: none.
        #expect(wait(1_000_000, true, 500_000, 1_000_000))
        #expect(!wait(1_000_000, true, 1_000_000, 1_200_000))
        // Nothing much ahead of it (a frame or two awaiting a delayed acknowledgement): no extra time.
        #expect(!wait(1_000_000, false, 999_000, 1_000_000))
        #expect(!ServerCore.isBacklog(written: 1_000_000, acked: 1_000_000 - 2_000))
        #expect(ServerCore.isBacklog(written: 1_000_000, acked: 1_000_000 - ServerCore.lateBacklogBytes))
        #expect(!ServerCore.isBacklog(written: 5, acked: 10))  // an acknowledgement read after the count
    }
}
