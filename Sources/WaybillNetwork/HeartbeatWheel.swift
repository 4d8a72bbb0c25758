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
/// the server says the peer is still reading what was sent before the ping: then it waits another
/// interval for the pong. Why: the ping queues behind the socket's unsent frames, so a phone on a
/// slow link reading a long replay gets it late, and dropping it there made it reconnect and read
/// the same replay again. A peer that reads nothing makes no progress and goes as before.
/// A value: the server performs the actions. Service thread only.
struct HeartbeatWheel {
    enum Action: Equatable {
        case ping(SocketID)
        case drop(SocketID)
    }

    private var buckets: [[SocketID]]
    private var cursor = 0
    /// Members, and whether each owes a pong.
    private var awaitingPong: [SocketID: Bool] = [:]

    /// - Parameter interval: ticks between two pings of one socket; at least 1.
    init(interval: Int) {
        buckets = Array(repeating: [], count: max(1, interval))
    }

    var count: Int { awaitingPong.count }

    /// Adds a socket; its first turn comes a full interval from now.
    mutating func add(_ socket: SocketID) {
        guard awaitingPong.updateValue(false, forKey: socket) == nil else { return }
        buckets[(cursor + buckets.count - 1) % buckets.count].append(socket)
    }

    /// Removes a socket (its bucket entry is dropped lazily, on its next turn).
    mutating func remove(_ socket: SocketID) {
        awaitingPong[socket] = nil
    }

    /// The peer answered a ping: it stays.
    mutating func pongReceived(from socket: SocketID) {
        if awaitingPong[socket] != nil { awaitingPong[socket] = false }
    }

    /// One tick passed: the actions for the sockets whose turn it is. Dropped sockets are removed.
    /// - Parameter isStillReading: asked for each socket that owes a pong at its turn: whether its
    ///   peer has read more of the output sent before the ping since the socket's last turn.
    mutating func tick(isStillReading: (SocketID) -> Bool = { _ in false }) -> [Action] {
        let due = buckets[cursor]
        var kept: [SocketID] = []
        kept.reserveCapacity(due.count)
        var actions: [Action] = []
        actions.reserveCapacity(due.count)
        for socket in due {
            guard let owesPong = awaitingPong[socket] else { continue }  // gone since
            if owesPong {
                if isStillReading(socket) {
                    kept.append(socket)  // still owes the pong; no second ping behind the first
                    continue
                }
                awaitingPong[socket] = nil
                actions.append(.drop(socket))
            } else {
                awaitingPong[socket] = true
                kept.append(socket)
                actions.append(.ping(socket))
            }
        }
        buckets[cursor] = kept
        cursor = (cursor + 1) % buckets.count
        return actions
    }
}
