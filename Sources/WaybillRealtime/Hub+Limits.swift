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
        /// Sockets one user may have open on this node; one more is closed with 1013. A phone has
        /// one (two while a reconnect overlaps a half-open one), a dispatcher one per tab and
        /// stream. Without it one token, stolen or buggy, could open sockets until the process ran
        /// out of file descriptors, `/healthz` included (found by a review).
        public var maxSocketsPerUser = 32

        public init() {}
    }

    /// A socket sent more frames than its budget. Service thread.
    func frameBudgetExceeded(_ socket: SocketID, io: any SocketIO) {
        metrics.overflowed(.inboundFrames)
        logger.warning("socket sent too many frames; closing it", ["socket": "\(socket)"])
        connections[socket]?.machine.closing()
        io.close(socket, code: 1008, reason: "too many messages")
    }

    /// A socket's machine gave up buffering during its replay. Service thread.
    func replayBufferOverflowed(_ socket: SocketID, code: Int, reason: String, io: any SocketIO) {
        metrics.overflowed(.replayBuffer)
        logger.warning("replay buffer full; closing socket", ["socket": "\(socket)"])
        io.close(socket, code: code, reason: reason)
    }
}
