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
struct KeepAliveWheel<Key: Hashable> {
    /// Each bucket holds the connections that went idle in one tick, with the idle period's token.
    private var buckets: [[(key: Key, token: UInt64)]]
    private var cursor = 0
    /// The connections idle now, each with the token of its current idle period: an entry left in
    /// a bucket by an earlier idle period of the same connection (it was taken out and put back
    /// since) no longer matches, so it closes nothing.
    private var idle: [Key: UInt64] = [:]
    private var nextToken: UInt64 = 0

    /// - Parameter ticks: the keep-alive timeout in ticks; at least 1.
    init(ticks: Int) {
        // One bucket more than the timeout: a connection that goes idle just after a tick is due
        // `ticks + 1` ticks later, one that goes idle just before it `ticks` ticks and a moment later.
        // So none is due before the timeout, and each within one tick after it.
        buckets = Array(repeating: [], count: max(1, ticks) + 1)
    }

    /// Connections idle now.
    var count: Int { idle.count }

    func contains(_ key: Key) -> Bool { idle[key] != nil }

    /// `key` went idle now (again, if it was already: its idle period starts over).
    mutating func add(_ key: Key) {
        nextToken += 1
        idle[key] = nextToken
        buckets[(cursor + buckets.count - 1) % buckets.count].append((key, nextToken))
    }

    /// `key` is no longer idle (a request began on it) or no longer open. Its bucket entry is
    /// dropped on that bucket's turn.
    mutating func remove(_ key: Key) {
        idle[key] = nil
    }

    /// One tick passed: the connections whose idle period reached the timeout, taken out.
    mutating func tick() -> [Key] {
        let due = buckets[cursor]
        buckets[cursor] = []
        cursor = (cursor + 1) % buckets.count
        var expired: [Key] = []
        for entry in due where idle[entry.key] == entry.token {
            idle[entry.key] = nil
            expired.append(entry.key)
        }
        return expired
    }
}
