import Testing
import WaybillDomain
import WaybillRealtime

/// A driver socket's receipts on plain values and made-up times: at most one write per second.
struct ReceiptCoalescerTests {
    static func seen(_ pairs: (Int64, Int)...) -> [SeenReport] {
        pairs.map { SeenReport(orderID: OrderID($0.0), version: $0.1) }
    }

    @Test func theFirstReceiptIsWrittenAtOnce() {
        var coalescer = ReceiptCoalescer()
        #expect(coalescer.received(Self.seen((42, 5)), at: .seconds(10)) == .write(Self.seen((42, 5))))
        #expect(coalescer.pending.isEmpty)
    }

    @Test func receiptsWithinASecondWaitAndGoOutInOneWrite() {
        var coalescer = ReceiptCoalescer()
        #expect(coalescer.received(Self.seen((1, 1)), at: .seconds(10)) == .write(Self.seen((1, 1))))
        #expect(coalescer.written(at: .milliseconds(10_050)) == .none)
        // 200 ms after the first write began: wait the remaining 800 ms, once.
        #expect(coalescer.received(Self.seen((2, 3)), at: .milliseconds(10_200)) == .wake(after: .milliseconds(800)))
        #expect(coalescer.received(Self.seen((3, 1), (2, 4)), at: .milliseconds(10_500)) == .none)
        #expect(
            coalescer.received(Self.seen((2, 2)), at: .milliseconds(10_600)) == .none, "an older version never wins")
        #expect(coalescer.woke(at: .milliseconds(11_000)) == .write(Self.seen((2, 4), (3, 1))))
    }

    /// The store was down for a moment: the failed write's receipts go out again, after a backoff
    /// that doubles, merged with what came meanwhile (the device never sends a version twice on one
    /// socket, so a dropped receipt stayed "not seen"). After `maxRetries` failures they are dropped.
    @Test func aFailedWriteIsTriedAgainAfterABackoffThenGivenUp() {
        var coalescer = ReceiptCoalescer(interval: .seconds(1), maxRetries: 2)
        #expect(coalescer.received(Self.seen((1, 1), (2, 1)), at: .seconds(0)) == .write(Self.seen((1, 1), (2, 1))))
        // Failed: back in the queue, the next try 2 s after this one began.
        #expect(coalescer.written(at: .milliseconds(100), failed: Self.seen((1, 1), (2, 1))) == .wake(after: .milliseconds(1_900)))
        #expect(coalescer.received(Self.seen((2, 3)), at: .milliseconds(500)) == .none)
        #expect(coalescer.woke(at: .seconds(2)) == .write(Self.seen((1, 1), (2, 3))))
        // Failed again: 4 s this time.
        #expect(coalescer.written(at: .milliseconds(2_100), failed: Self.seen((1, 1), (2, 3))) == .wake(after: .milliseconds(3_900)))
        #expect(coalescer.woke(at: .seconds(6)) == .write(Self.seen((1, 1), (2, 3))))
        // A third failure with `maxRetries: 2`: dropped, and the pace is a second again.
        #expect(coalescer.written(at: .milliseconds(6_100), failed: Self.seen((1, 1), (2, 3))) == .none)
        #expect(coalescer.pending.isEmpty && coalescer.isIdle)
        #expect(coalescer.received(Self.seen((3, 1)), at: .milliseconds(6_500)) == .wake(after: .milliseconds(500)))
        // One that commits resets the count.
        #expect(coalescer.woke(at: .seconds(7)) == .write(Self.seen((3, 1))))
        #expect(coalescer.written(at: .milliseconds(7_100)) == .none)
        #expect(coalescer.failures == 0)
    }

    /// While the driver has a socket here, failed writes are tried again past `maxRetries`, every
    /// 30 s at most: that device will not report those versions again, so a store outage of over
    /// 90 s left them "not seen" on the panel until it reconnected (found by a review).
    @Test func aFailedWriteKeepsBeingTriedWhileTheDriverHasASocket() {
        var coalescer = ReceiptCoalescer(interval: .seconds(1), maxRetries: 2)
        let receipts = Self.seen((1, 7))
        var now = Duration.zero
        #expect(coalescer.received(receipts, at: now) == .write(receipts))
        for attempt in 1...8 {
            let action = coalescer.written(at: now + .milliseconds(100), failed: receipts, keepTrying: true)
            guard case .wake(let wait) = action else {
                Issue.record("attempt \(attempt): \(action)")
                return
            }
            #expect(wait <= .seconds(30), "attempt \(attempt): the backoff stays at 30 s at most")
            now = now + .milliseconds(100) + wait
            #expect(coalescer.woke(at: now) == .write(receipts), "attempt \(attempt): tried again")
        }
        #expect(coalescer.written(at: now + .milliseconds(100)) == .none)
        #expect(coalescer.isIdle && coalescer.failures == 0)
    }

    /// A history rewind (a failover that lost commits) drops what waits and what a write in flight
    /// carried if it fails: kept, the old history's v9 hid the restored v7 the device reports after
    /// its `reset` (the highest version wins), and nothing was recorded (found by a review).
    @Test func aRewindDropsTheOldHistorysReceipts() {
        var coalescer = ReceiptCoalescer(interval: .seconds(1))
        #expect(coalescer.received(Self.seen((42, 9)), at: .zero) == .write(Self.seen((42, 9))))
        #expect(coalescer.received(Self.seen((43, 4)), at: .milliseconds(200)) == .none, "waits for the write in flight")
        coalescer.historyRewound()
        #expect(coalescer.pending.isEmpty)
        #expect(coalescer.written(at: .seconds(5), failed: Self.seen((42, 9)), keepTrying: true) == .none, "not tried again")
        #expect(coalescer.received(Self.seen((42, 7)), at: .seconds(6)) == .write(Self.seen((42, 7))), "the restored version")
    }

    @Test func writesNeverOverlap() {
        var coalescer = ReceiptCoalescer()
        _ = coalescer.received(Self.seen((1, 1)), at: .seconds(0))
        // The first write is slow: more than a second later it has not finished yet.
        #expect(coalescer.received(Self.seen((1, 2)), at: .seconds(2)) == .none)
        #expect(coalescer.written(at: .milliseconds(2_500)) == .write(Self.seen((1, 2))))
    }

    @Test func aWriteIsNeverLessThanASecondAfterThePreviousOne() {
        var coalescer = ReceiptCoalescer(interval: .seconds(1))
        var writes: [Duration] = []
        var wake: Duration?
        // Receipts every 100 ms for 5 s: the hub performs wakes when they are due.
        for tick in 0..<50 {
            let now = Duration.milliseconds(100 * tick)
            if let due = wake, due <= now {
                wake = nil
                if case .write = coalescer.woke(at: now) {
                    writes.append(now)
                    _ = coalescer.written(at: now)
                }
            }
            switch coalescer.received(Self.seen((7, tick + 1)), at: now) {
            case .write:
                writes.append(now)
                _ = coalescer.written(at: now)
            case .wake(let after): wake = now + after
            case .none: break
            }
        }
        #expect(writes.count == 5)
        #expect(zip(writes, writes.dropFirst()).allSatisfy { $1 - $0 >= .seconds(1) })
    }

    /// A device reports its whole list when it connects, up to 1 000 rows (two halves of 500), in
    /// frames of at most 100 that arrive while the first write runs: all of them wait for the next
    /// write (at 500 the newest orders of a long list were dropped, and stayed "not seen"; a review).
    @Test func aWholeDriverListReportedAtConnectWaitsForTheNextWrite() {
        var coalescer = ReceiptCoalescer()
        #expect(coalescer.received(Self.seen((1, 1)), at: .zero) == .write(Self.seen((1, 1))))
        for first in stride(from: 2, through: 1_001, by: 100) {
            _ = coalescer.received((first..<(first + 100)).map { SeenReport(orderID: OrderID(Int64($0)), version: 1) }, at: .milliseconds(10))
        }
        #expect(coalescer.pending.count == 1_000)
    }

    @Test func pendingOrdersAreBounded() {
        var coalescer = ReceiptCoalescer(interval: .seconds(1), maxPending: 3)
        _ = coalescer.received(Self.seen((1, 1)), at: .zero)
        _ = coalescer.received(Self.seen((2, 1), (3, 1), (4, 1), (5, 1)), at: .milliseconds(10))
        #expect(coalescer.pending.count == 3)
        _ = coalescer.received(Self.seen((2, 9)), at: .milliseconds(20))
        #expect(coalescer.pending[OrderID(2)] == 9, "a waiting order still takes a newer version")
    }

    /// When the hub may drop a driver's coalescer: nothing waiting, writing or scheduled, and its
    /// last write a whole interval ago (a driver that closes and reopens keeps its pace).
    @Test func idleAndWithinTheIntervalTellWhenADriversCoalescerMayGo() {
        var coalescer = ReceiptCoalescer()
        #expect(coalescer.isIdle && !coalescer.isWithinInterval(at: .zero))
        #expect(coalescer.received(Self.seen((1, 1)), at: .seconds(5)) == .write(Self.seen((1, 1))))
        #expect(!coalescer.isIdle, "writing")
        _ = coalescer.written(at: .milliseconds(5_010))
        #expect(coalescer.isIdle && coalescer.isWithinInterval(at: .milliseconds(5_900)))
        #expect(coalescer.received(Self.seen((2, 1)), at: .milliseconds(5_300)) == .wake(after: .milliseconds(700)))
        #expect(!coalescer.isIdle, "waiting, a wake-up scheduled")
        #expect(coalescer.woke(at: .seconds(6)) == .write(Self.seen((2, 1))))
        _ = coalescer.written(at: .milliseconds(6_020))
        #expect(coalescer.isIdle && !coalescer.isWithinInterval(at: .seconds(7)))
    }

    @Test func nonPositiveVersionsAreIgnored() {
        var coalescer = ReceiptCoalescer()
        #expect(coalescer.received(Self.seen((1, 0), (2, -3)), at: .zero) == .none)
    }
}
