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
    /// The connections with an entry in a bucket, each with the tick its idle period ends at, or
    /// `nil` when it was taken out since and waits for its turn to be dropped. One table, not the
    /// idle ones and the scheduled ones apart: a request took three hash lookups between them, now
    /// one as it begins and one as its answer ends (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    private var scheduled: [Key: UInt64?] = [:]
    /// Connections idle now (those of `scheduled` with an end).
    private var idle = 0
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
    var count: Int { idle }

    /// Entries in the buckets (at most one per connection; tests).
    var entries: Int { scheduled.count }

    func contains(_ key: Key) -> Bool { scheduled[key].map { $0 != nil } ?? false }

    /// `key` went idle now (again, if it was already: its idle period starts over).
    mutating func add(_ key: Key) {
        schedule(key, at: now + ticks + 1)
    }

    /// `key` is no longer idle (a request began on it) or no longer open. Its entry is dropped at
    /// its turn.
    mutating func remove(_ key: Key) {
        guard let index = scheduled.index(forKey: key), scheduled.values[index] != nil else { return }
        scheduled.values[index] = nil
        idle -= 1
    }

    /// One tick passed: the connections whose idle period reached the timeout, taken out; at most
    /// `limit` of them, the others stay idle and due at the next tick.
    mutating func tick(limit: Int = .max) -> [Key] {
        now += 1
        let index = slot(now)
        let due = buckets[index]
        guard !due.isEmpty else { return [] }
        buckets[index] = []
        var expired: [Key] = []
        for key in due {
            guard let index = scheduled.index(forKey: key) else { continue }  // (a bucket's key always has one)
            guard let end = scheduled.values[index] else {
                scheduled.remove(at: index)  // taken out since
                continue
            }
            if end > now {
                buckets[slot(end)].append(key)  // idle again since: where this period ends
            } else if expired.count < limit {
                scheduled.remove(at: index)
                idle -= 1
                expired.append(key)
            } else {
                buckets[slot(now + 1)].append(key)  // past this tick's limit: the next tick's
            }
        }
        return expired
    }

    /// Sets `key`'s end and makes sure it has one entry no later than it: an existing entry is
    /// never later than a new end (ends only grow).
    private mutating func schedule(_ key: Key, at end: UInt64) {
        if let index = scheduled.index(forKey: key) {
            if scheduled.values[index] == nil { idle += 1 }
            scheduled.values[index] = end
        } else {
            scheduled[key] = end
            idle += 1
            buckets[slot(end)].append(key)
        }
    }

    private func slot(_ tick: UInt64) -> Int { Int(tick % UInt64(buckets.count)) }
}
