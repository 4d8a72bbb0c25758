/// Which kept-alive HTTP connections have been idle for the keep-alive timeout, at a constant cost
/// per request and a cost per tick proportional to the connections due in that tick.
///
/// Why not lws's own keep-alive timer: lws keeps every pending timeout of the service thread in one
/// sorted linked list and inserts each new one by walking it from the head. An idle connection's
/// timer sat in that list for the whole keep-alive timeout, and every request sets three or four
/// timers later than all of them (holding the header table, waiting for content, the handler's
/// bound, the keep-alive itself), so each walked past every idle connection. Measured: with 4 000
/// idle kept-alive connections beside the benchmark's 64, CPU per write at 1 000/s went from 222 to
/// 333 µs, a quarter of it in `lws_dll2_add_sorted` (docs/BENCHMARKS.md, 2026-12-06 15:17–). A
/// driver's app keeps one such connection per phone between its refetches, so the list would grow
/// with the fleet. The same walk is why `HeartbeatWheel` pings WebSockets instead of lws.
///
/// The server takes a connection's lws timer off as its answer completes the transaction
/// (`ServerCore.connectionWentIdle`) and puts it here; a new request on it takes it out. A value:
/// the server closes what `tick()` returns. Service thread only.
///
/// Each connection has at most one entry in the buckets, however many requests it answers while
/// it waits there: an entry whose connection went idle again since is moved, at its turn, to the
/// bucket where the new idle period ends. (An entry per answer kept one per request for the whole
/// timeout: at an hour's timeout and 2 000 answers a second, millions of them; found by a review.)
struct KeepAliveWheel<Key: Hashable> {
    private var buckets: [[Key]]
    /// Ticks so far; bucket `t % buckets.count` holds what is due at tick `t`.
    private var now: UInt64 = 0
    /// The connections idle now, each with the tick count when its idle period began.
    private var idleSince: [Key: UInt64] = [:]
    /// The connections with an entry in a bucket (idle now, or taken out since and not yet at their turn).
    private var scheduled: Set<Key> = []
    private let ticks: UInt64

    /// - Parameter ticks: the keep-alive timeout in ticks; at least 1.
    init(ticks: Int) {
        self.ticks = UInt64(max(1, ticks))
        // One bucket more than the timeout: a connection that goes idle just after a tick is due
        // `ticks + 1` ticks later, one that goes idle just before it `ticks` ticks and a moment later.
        // So none is due before the timeout, and each within one tick after it.
        buckets = Array(repeating: [], count: max(1, ticks) + 1)
    }

    /// Connections idle now.
    var count: Int { idleSince.count }

    /// Entries in the buckets (at most one per connection; tests).
    var entries: Int { scheduled.count }

    func contains(_ key: Key) -> Bool { idleSince[key] != nil }

    /// `key` went idle now (again, if it was already: its idle period starts over).
    mutating func add(_ key: Key) {
        idleSince[key] = now
        if scheduled.insert(key).inserted { buckets[slot(dueAt: now + ticks + 1)].append(key) }
    }

    /// `key` is no longer idle (a request began on it) or no longer open. Its entry is dropped at
    /// its turn.
    mutating func remove(_ key: Key) {
        idleSince[key] = nil
    }

    /// One tick passed: the connections whose idle period reached the timeout, taken out.
    mutating func tick() -> [Key] {
        now += 1
        let index = slot(dueAt: now)
        let due = buckets[index]
        guard !due.isEmpty else { return [] }
        buckets[index] = []
        var expired: [Key] = []
        for key in due {
            guard let since = idleSince[key] else {
                scheduled.remove(key)  // taken out since
                continue
            }
            let dueAt = since + ticks + 1
            if dueAt <= now {
                idleSince[key] = nil
                scheduled.remove(key)
                expired.append(key)
            } else {
                buckets[slot(dueAt: dueAt)].append(key)  // idle again since: where this period ends
            }
        }
        return expired
    }

    private func slot(dueAt tick: UInt64) -> Int { Int(tick % UInt64(buckets.count)) }
}
