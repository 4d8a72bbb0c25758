import WaybillDomain
import WaybillNetwork
import WaybillObservability

extension Hub {
    /// The hub's bounds on memory and tasks; past each, a socket is closed with a code that tells
    /// the client to come back (docs/HARDENING.md, item 3). Each overflow is counted in
    /// `waybill_bound_overflows_total`.
    public struct Limits: Sendable {
        /// Sockets authenticating at once (each one a task and a store call); more are closed with 1013.
        public var maxConcurrentAuthentications = 1024
        /// A socket not authenticated after this long is closed with 1013 (a stalled store must not
        /// keep unauthenticated sockets, and their tasks, forever).
        public var authenticationTimeout: Duration = .seconds(10)
        /// Replay queries at once (each holds up to `maxReplayEvents` events); more are closed with 1013.
        public var maxConcurrentReplays = 64
        /// A socket whose replay query has not answered after this long is closed with 1013. SQLite's
        /// reads wait in its reader queue with no deadline of their own (PostgreSQL's calls have a
        /// budget): the socket stayed in replay, its pong owed and its buffer growing (found by a
        /// review, 2026-12-05).
        public var replayTimeout: Duration = .seconds(10)
        /// Live events one socket buffers while its replay runs, and their bytes; past either, 4008.
        public var maxReplayBufferEvents = 10_000
        public var maxReplayBufferBytes = Int.max
        /// Text frames one socket may send per second on average, and at once (`FrameBudget`);
        /// past them, 1008. An app sends a ping every 10 s and `seen` after a fetch; the
        /// benchmarks' pong probe pings every 20 ms. At about 50 µs of the service thread per
        /// ping, a socket at the limit costs 0.5 % of a core (one at line rate took all of it).
        public var maxFramesPerSecond = 100.0
        public var frameBurst = 200
        /// Text frames all of one user's sockets on this node may send together, per second and at
        /// once; past them the socket that sent the frame is closed with 1008. The socket's own
        /// budget times `maxSocketsPerUser` let one token (a stolen one, a buggy app) send 3 200
        /// frames a second from 32 sockets, about a sixth of the service thread (found by a
        /// review); a phone sends one every 10 s, a dispatcher's tabs one each.
        public var maxFramesPerUserPerSecond = 200.0
        public var userFrameBurst = 400
        /// Sockets one user may have open on this node; one more is closed with 1013. A phone has
        /// one (two while a reconnect overlaps a half-open one), a dispatcher one per tab and
        /// stream. Without it one token, stolen or buggy, could open sockets until the process ran
        /// out of file descriptors, `/healthz` included (found by a review).
        public var maxSocketsPerUser = 32

        public init() {}
    }

    /// A socket sent more frames than its budget, or its user's sockets together than theirs
    /// (`byUser`). Service thread.
    func frameBudgetExceeded(_ socket: SocketID, byUser: Bool = false, io: any SocketIO) {
        metrics.overflowed(.inboundFrames)
        logger.warning(
            byUser ? "user's sockets sent too many frames; closing this one" : "socket sent too many frames; closing it",
            ["socket": "\(socket)"])
        connections[socket]?.machine.closing()
        io.close(socket, code: 1008, reason: "too many messages")
    }

    /// Takes one frame from `user`'s budget (all of the user's sockets on this node); `false` when
    /// they are over it. The budget is dropped with the user's last socket (`socketClosed`).
    func takeUserFrame(_ user: UserID, at now: Duration) -> Bool {
        let limits = configuration.limits
        return userFrameBudgets[user, default: FrameBudget(perSecond: limits.maxFramesPerUserPerSecond, burst: limits.userFrameBurst)]
            .take(at: now)
    }

    /// A socket's machine gave up buffering during its replay. Service thread.
    func replayBufferOverflowed(_ socket: SocketID, code: Int, reason: String, io: any SocketIO) {
        metrics.overflowed(.replayBuffer)
        logger.warning("replay buffer full; closing socket", ["socket": "\(socket)"])
        io.close(socket, code: code, reason: reason)
    }
}
