/// Decides, once per tick, which WebSockets get a protocol ping and which are dropped for not
/// answering the previous one, at a cost proportional to the sockets due in that tick.
///
/// Why not lws's own idle policy (`retry_and_idle_policy`): lws keeps one timer per socket in a sorted
/// linked list and re-inserts it from the head on every pong. With all sockets due about one interval
/// ahead, each insert walks the whole list: measured at 10 000 sockets, that was half the service
/// thread's CPU and 300 ms stalls each time the pongs came back. Here sockets sit in one of
/// `interval` buckets (by the tick they joined); each tick visits one bucket. The server ticks every
/// 100 ms, so sockets that connected in the same second are pinged in ten small groups, not one burst.
///
/// A socket is pinged `interval` ticks after it joins and then every `interval` ticks; if no pong
/// arrived by its next turn, it is dropped (so a dead peer goes within about two intervals), unless
/// the server says its ping may not have reached the peer yet: then it waits another interval, at
/// most `maxExtraTurns` times per ping. Why: the ping waits behind what the kernel already holds for
/// the socket, so a phone on a slow link reading a long replay got it late, was dropped, and read
/// the same replay again. Any message from the peer counts as a pong too.
/// A value: the server performs the actions. Service thread only.
struct HeartbeatWheel {
    enum Action: Equatable {
        case ping(SocketID)
        case drop(SocketID)
    }

    /// Extra intervals one ping may be waited for (`tick(mayWait:)`): at the default 25 s, a 512 KiB
    /// replay ahead of the ping gets through at about 2.6 KB/s.
    static let maxExtraTurns: UInt8 = 8

    private var buckets: [[SocketID]]
    private var cursor = 0
    /// Members: 0 when no pong is owed, else 1 + the extra intervals its ping has been waited for.
    private var owed: [SocketID: UInt8] = [:]

    /// - Parameter interval: ticks between two pings of one socket; at least 1.
    init(interval: Int) {
        buckets = Array(repeating: [], count: max(1, interval))
    }

    var count: Int { owed.count }

    /// Adds a socket; its first turn comes a full interval from now.
    mutating func add(_ socket: SocketID) {
        guard owed.updateValue(0, forKey: socket) == nil else { return }
        buckets[(cursor + buckets.count - 1) % buckets.count].append(socket)
    }

    /// Removes a socket (its bucket entry is dropped lazily, on its next turn).
    mutating func remove(_ socket: SocketID) {
        owed[socket] = nil
    }

    /// The peer answered a ping, or sent anything: it stays.
    mutating func pongReceived(from socket: SocketID) {
        if owed[socket] != nil { owed[socket] = 0 }
    }

    /// One tick passed: the actions for the sockets whose turn it is. Dropped sockets are removed.
    /// - Parameter mayWait: asked for each socket that owes a pong at its turn (at most
    ///   `maxExtraTurns` times per ping): whether its ping may not have reached the peer yet.
    mutating func tick(mayWait: (SocketID) -> Bool = { _ in false }) -> [Action] {
        let due = buckets[cursor]
        var kept: [SocketID] = []
        kept.reserveCapacity(due.count)
        var actions: [Action] = []
        actions.reserveCapacity(due.count)
        for socket in due {
            guard let state = owed[socket] else { continue }  // gone since
            if state == 0 {
                owed[socket] = 1
                kept.append(socket)
                actions.append(.ping(socket))
            } else if state <= Self.maxExtraTurns && mayWait(socket) {
                owed[socket] = state + 1  // still owes the pong; no second ping behind the first
                kept.append(socket)
            } else {
                owed[socket] = nil
                actions.append(.drop(socket))
            }
        }
        buckets[cursor] = kept
        cursor = (cursor + 1) % buckets.count
        return actions
    }
}
