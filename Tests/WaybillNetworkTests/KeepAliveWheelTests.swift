import Testing

#if canImport(Glibc)
    import Glibc
#endif

@testable import WaybillNetwork

/// `KeepAliveWheel` on plain keys, without sockets: when an idle connection is due, and which
/// entries no longer count.
struct KeepAliveWheelTests {
    /// Ticks until `tick()` first returns anything.
    private func ticksUntilDue(_ wheel: inout KeepAliveWheel<Int>, limit: Int = 100) -> (ticks: Int, due: [Int]) {
        for n in 1...limit {
            let due = wheel.tick()
            if !due.isEmpty { return (n, due) }
        }
        return (limit, [])
    }

    /// A connection idle for `ticks` ticks is due at the tick after: the tick it went idle in counts
    /// only partly, so none is closed before the timeout and each within a tick after it.
    @Test(arguments: [1, 2, 3, 50])
    func anIdleConnectionIsDueOneTickAfterTheTimeout(ticks: Int) {
        var wheel = KeepAliveWheel<Int>(ticks: ticks)
        _ = wheel.tick()  // somewhere in the cycle, not at its start
        wheel.add(7)
        #expect(wheel.contains(7) && wheel.count == 1)
        let (n, due) = ticksUntilDue(&wheel)
        #expect(n == ticks + 1)
        #expect(due == [7])
        #expect(!wheel.contains(7) && wheel.count == 0)
        let later = ticksUntilDue(&wheel, limit: 3 * (ticks + 1))
        #expect(later.due.isEmpty)  // returned once only
    }

    /// A request began on it (or it closed): it is not closed at its old turn.
    @Test func aRemovedConnectionIsNotDue() {
        var wheel = KeepAliveWheel<Int>(ticks: 2)
        wheel.add(1)
        wheel.add(2)
        wheel.remove(1)
        let first = ticksUntilDue(&wheel)
        #expect(first.due == [2])
        let later = ticksUntilDue(&wheel, limit: 10)
        #expect(later.due.isEmpty)
    }

    /// One table holds both the idle connections and the bucket entries, with a count of the idle
    /// ones: a connection taken out twice (a request began, then lws freed it) counts once, one
    /// taken out and idle again before its entry's turn is idle once, with one entry.
    @Test func takenOutTwiceOrIdleAgainBeforeItsTurnCountsOnce() {
        var wheel = KeepAliveWheel<Int>(ticks: 3)
        wheel.add(1)
        wheel.add(2)
        wheel.remove(1)
        wheel.remove(1)
        wheel.remove(9)  // never idle
        #expect(wheel.count == 1 && !wheel.contains(1) && wheel.contains(2) && wheel.entries == 2)
        wheel.add(1)
        #expect(wheel.count == 2 && wheel.contains(1) && wheel.entries == 2)
        #expect(Set(ticksUntilDue(&wheel).due) == [1, 2])
        #expect(wheel.count == 0 && wheel.entries == 0)
        wheel.add(1)
        wheel.remove(1)
        _ = ticksUntilDue(&wheel, limit: 10)
        #expect(wheel.count == 0 && wheel.entries == 0)  // the taken-out entry dropped at its turn
    }

    /// Idle again after a request: its idle period starts over. The entry of the earlier period,
    /// still in its bucket, closes nothing at its turn; it moves to where the new period ends
    /// (checked against the period's start, it would close a connection idle for a moment only).
    @Test func aConnectionIdleAgainIsDueAFullTimeoutAfterItsLastAnswer() {
        var wheel = KeepAliveWheel<Int>(ticks: 4)
        wheel.add(9)
        _ = wheel.tick()
        _ = wheel.tick()
        wheel.remove(9)  // a request
        wheel.add(9)  // its answer: idle again
        let (n, due) = ticksUntilDue(&wheel)
        #expect(n == 5)  // counted from the second add, not 3 from the first
        #expect(due == [9])
        // Added twice without a removal between (the answer of a request it never saw begin): one
        // idle period, the later one.
        wheel.add(3)
        _ = wheel.tick()
        wheel.add(3)
        let again = ticksUntilDue(&wheel)
        #expect(again.ticks == 5 && again.due == [3])
    }

    /// However many requests a connection answers while it waits, it has one entry in the wheel:
    /// an entry per answer kept one per request for the whole timeout (at an hour's timeout and
    /// 2 000 answers a second, millions). Found by a review.
    @Test func aBusyConnectionKeepsOneEntry() {
        var wheel = KeepAliveWheel<Int>(ticks: 50)
        for round in 0..<200 {
            for key in 0..<10 {
                wheel.remove(key)  // a request begins
                wheel.add(key)  // and is answered
            }
            if round % 2 == 0 { #expect(wheel.tick().isEmpty) }
        }
        #expect(wheel.entries == 10 && wheel.count == 10)
        // Still each due a full timeout after its last answer.
        let (n, due) = ticksUntilDue(&wheel)
        #expect(n == 51 && Set(due) == Set(0..<10))
        #expect(wheel.entries == 0)
        // One taken out for good leaves its entry until that entry's turn only.
        wheel.add(1)
        wheel.remove(1)
        #expect(wheel.entries == 1 && wheel.count == 0)
        let none = ticksUntilDue(&wheel, limit: 60)
        #expect(none.due.isEmpty && wheel.entries == 0)
    }

    /// Many connections going idle in the same tick are due together, in the order they went idle;
    /// those of the next tick one tick later.
    @Test func connectionsAreDueByTheTickTheyWentIdleIn() {
        var wheel = KeepAliveWheel<Int>(ticks: 3)
        for key in 0..<100 { wheel.add(key) }
        _ = wheel.tick()
        for key in 100..<150 { wheel.add(key) }
        #expect(wheel.count == 150)
        #expect(wheel.tick().isEmpty && wheel.tick().isEmpty)
        #expect(wheel.tick() == Array(0..<100))
        #expect(wheel.tick() == Array(100..<150))
        #expect(wheel.count == 0)
    }

    /// At most `limit` are returned in one tick; the others stay idle and are due at the next,
    /// unless a request takes one out meanwhile.
    @Test func closesPastATicksLimitWaitForTheNextTick() {
        var wheel = KeepAliveWheel<Int>(ticks: 2)
        for key in 0..<10 { wheel.add(key) }
        #expect(wheel.tick(limit: 4).isEmpty && wheel.tick(limit: 4).isEmpty)
        #expect(wheel.tick(limit: 4) == [0, 1, 2, 3])
        #expect(wheel.count == 6 && wheel.contains(4))
        wheel.remove(5)  // a request on one that waited
        #expect(wheel.tick(limit: 4) == [4, 6, 7, 8])
        #expect(wheel.tick(limit: 4) == [9])
        #expect(wheel.count == 0 && wheel.entries == 0)
    }

    /// A connection whose peer's bytes wait in the kernel, unread by lws, is not idle at its turn.
    @Test func unreadBytesAreSeenOnTheSocket() throws {
        var fds: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        #expect(!ServerCore.hasUnreadBytes(fds[0]))
        #expect(write(fds[1], "GET", 3) == 3)
        #expect(ServerCore.hasUnreadBytes(fds[0]))
        var buffer = [UInt8](repeating: 0, count: 8)
        #expect(read(fds[0], &buffer, 8) == 3)
        #expect(!ServerCore.hasUnreadBytes(fds[0]))
        #expect(!ServerCore.hasUnreadBytes(-1))
    }

    /// A timeout below one tick still waits a whole tick.
    @Test func aTimeoutOfZeroTicksIsOne() {
        var wheel = KeepAliveWheel<Int>(ticks: 0)
        wheel.add(1)
        let due = ticksUntilDue(&wheel)
        #expect(due.ticks == 2 && due.due == [1])
    }
}
