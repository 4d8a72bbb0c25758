import Foundation
public import WaybillDomain
public import WaybillNetwork
public import WaybillObservability
public import WaybillStorage

/// Group membership of live sockets and fan-out of events, in `event_id` order (SPEC §4).
///
/// Each socket's protocol is a `ConnectionMachine` value; the hub routes events to the machines of
/// a group's sockets and performs what they return.
///
/// `@unchecked Sendable`: every stored property is touched only on the network service thread
/// (inside `WebSocketDelegate` calls and `execute` bodies). Slow work — authentication and replay
/// queries — runs on tasks and comes back through `execute`.
public final class Hub: WebSocketDelegate, @unchecked Sendable {
    public struct Configuration: Sendable {
        /// A resume that would replay more than this answers `reset` instead.
        public var maxReplayEvents = 10_000
        /// Nor may a replay be bigger than this (half the per-socket outbound limit).
        public var maxReplayBytes = 512 << 10
        /// Bounds on memory and tasks (docs/HARDENING.md, item 3).
        public var limits = Limits()

        public init(maxReplayEvents: Int = 10_000, maxReplayBytes: Int = 512 << 10, limits: Limits = Limits()) {
            self.maxReplayEvents = maxReplayEvents
            self.maxReplayBytes = maxReplayBytes
            self.limits = limits
        }
    }

    /// The per-socket protocol, over the frames the hub sends.
    public typealias Connection = ConnectionMachine<OutboundFrame>

    /// A socket's machine and what its logs name it by.
    struct Entry {
        let target: String
        var machine = Connection()
        /// A driver socket's company: it reports receipts (Hub+Receipts), for orders of that company.
        var company: CompanyID?
        /// `logouts.count` when the socket opened (its authentication starts then): a logout
        /// handled after it may have revoked the credentials the authentication read (`admit`).
        var openedAtLogout: UInt64 = 0
        /// The session epoch of the credential that admitted it: a logout closes it only if it
        /// revoked that credential (not a login made since).
        var epoch = SessionEpoch(0)
        /// Text frames it may still send (`Limits.maxFramesPerSecond`).
        var budget: FrameBudget

        enum FrameAdmission {
            /// Within the socket's budget; the user's (`nil` before admission) is looked at next.
            case taken(UserID?)
            case overBudget, ignored
        }

        /// A client frame arrived at `now`: taken from the budget if it allows, and then ignored
        /// before authentication. Frames sent while the authentication ran (up to its 10 s with a
        /// slow store) were free before the budget was looked at (found by a review). Ignored
        /// while closing.
        mutating func admitFrame(at now: Duration) -> FrameAdmission {
            guard machine.phase != .closing else { return .ignored }
            guard budget.take(at: now) else { return .overBudget }
            return machine.answersPings ? .taken(machine.userID) : .ignored
        }
    }

    let authenticator: any SocketAuthenticating
    let store: any OrderStore
    let metrics: Metrics
    let logger: Logger
    let configuration: Configuration
    let receipts: Receipts
    /// Time since the hub was made, on `receipts.clock` (an existential clock's instants cannot be subtracted).
    let elapsed: @Sendable () -> Duration
    /// Sleeps for the authentication deadline.
    let clock: any Clock<Duration>
    /// Authentication tasks and replay queries running now (each bounded by `configuration.limits`).
    let authentications: ConcurrencyGate
    /// One warning a second for each kind of socket trouble a store outage or a stalled store
    /// brings to every socket at once (authentication and replay, failed or timed out), saying how
    /// many were left out: `/metrics` counts each. Sockets reconnecting through a partition wrote
    /// a line each, the flood `LogLineRate` had already stopped for requests (a review, 2026-12-07).
    let troubleLines = (
        authenticationFailed: LogLineRate(), authenticationTimedOut: LogLineRate(), replayFailed: LogLineRate(),
        replayTimedOut: LogLineRate()
    )
    let replays: ConcurrencyGate
    var connections: [SocketID: Entry] = [:]
    /// Each driver's receipts on their way to the store, shared by all the driver's sockets and
    /// kept for a while after the last one closed (Hub+Receipts).
    var driverReceipts: [UserID: DriverReceipts] = [:]
    /// Logouts this node has acted on (`closeSockets(revokedBy:)`), to refuse sockets authenticated before them.
    var logouts = LogoutLedger()
    private var members: [Group: Set<SocketID>] = [:]
    /// Frames all of a user's sockets may still send (`Limits.maxFramesPerUserPerSecond`), for
    /// users with a socket admitted here.
    var userFrameBudgets: [UserID: FrameBudget] = [:]
    /// Admitted sockets per user: their count is checked against `Limits.maxSocketsPerUser`, and a
    /// logout closes these, not a walk over every socket of the node (found by an audit: at 15 000
    /// sockets each logout walked them all, and copied the table at its first close).
    var userSockets: [UserID: Set<SocketID>] = [:]
    /// The newest event the hub has delivered: the `event_id` and `cursor` of `connected` frames.
    private var lastDelivered: EventCursor
    /// Runs a body on the service thread; set once by `WaybillServer` after the HTTP server exists.
    /// Bounded there: past 100 000 waiting bodies it refuses, and every socket is closed with 1013.
    public nonisolated(unsafe) var execute: @Sendable (@escaping @Sendable (any SocketIO) -> Void) -> Void = { _ in }
    /// Runs the hub's own bookkeeping on the service thread, never refused (`nil`: `execute`). For
    /// the few bodies whose loss closing the sockets would not undo: the end of a driver's receipts
    /// write (lost, that driver's receipts stopped on this node for good) and of its release, and
    /// a history rewind (lost, sockets opened later were told the old history's newest). Each is
    /// rare by construction: one per store write, per second, or per rewind.
    public nonisolated(unsafe) var executeAlways: (@Sendable (@escaping @Sendable (any SocketIO) -> Void) -> Void)? = nil

    /// `executeAlways`, or `execute` when none was set (tests that run bodies directly).
    func executeSurely(_ body: @escaping @Sendable (any SocketIO) -> Void) {
        if let always = executeAlways { always(body) } else { execute(body) }
    }

    /// The pong every socket gets for the newest delivered event, built once per position: a pong
    /// follows on its socket every frame queued before it, so it can name how far the socket is.
    /// During a replay pongs wait for its end (`ConnectionMachine.ping()`), when the socket is live.
    /// A deliver batch the service thread refused never reaches the sockets while `lastDelivered`
    /// later moves past it: safe only because that refusal closes every socket (1013), so no pong
    /// is sent on a socket that missed it.
    private(set) var pong: (newest: EventCursor, frame: OutboundFrame)?

    /// `pong`'s frame for `lastDelivered`, rebuilt when that moved (service thread).
    func pongFrame() -> OutboundFrame {
        if let pong, pong.newest == lastDelivered { return pong.frame }
        let frame = OutboundFrame(text: EventFrame.pong(newest: lastDelivered))
        pong = (lastDelivered, frame)
        return frame
    }
    static let resetFrameShared = OutboundFrame(text: EventFrame.reset)

    /// - Parameter lastDelivered: where live delivery starts (the feed's start: the store's newest cursor).
    public init(
        authenticator: any SocketAuthenticating, store: any OrderStore, metrics: Metrics, logger: Logger,
        startingAfter lastDelivered: EventCursor, configuration: Configuration = Configuration(),
        receipts: Receipts = Receipts(), clock: any Clock<Duration> = ContinuousClock()
    ) {
        self.clock = clock
        authentications = ConcurrencyGate(limit: configuration.limits.maxConcurrentAuthentications)
        replays = ConcurrencyGate(limit: configuration.limits.maxConcurrentReplays)
        self.authenticator = authenticator
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.lastDelivered = lastDelivered
        self.configuration = configuration
        self.receipts = receipts
        self.elapsed = Self.stopwatch(receipts.clock)
        metrics.delivered(through: lastDelivered.id.rawValue)
    }

    private static func stopwatch<C: Clock<Duration>>(_ clock: C) -> @Sendable () -> Duration {
        let start = clock.now
        return { start.duration(to: clock.now) }
    }

    // MARK: Fan-out

    /// Hands each event to the machines of its groups' sockets (they send, buffer or skip it).
    /// `frames` are encoded once per event, off the service thread; `batch` is ascending by id.
    ///
    /// The batch is first split by group (in id order), then each socket is looked up once for all
    /// of its group's events, not once per event: with 1 000 sockets, the look-ups (machine, then
    /// queue) were most of the hub's own cost (docs/BENCHMARKS.md). A socket is in one group, so
    /// each socket still gets its events in id order.
    public func deliver(_ batch: [(StoredEvent, OutboundFrame)], io: any SocketIO) {
        var sent = 0
        if batch.count == 1, let (stored, frame) = batch.first {
            // One event (a write committed alone, the usual case): its groups straight, without
            // the table by group below and the arrays it allocates per delivery.
            if stored.id > lastDelivered.id { lastDelivered = stored.cursor }
            for group in stored.event.groups {
                guard let sockets = members[group] else { continue }
                sent += send(stored.id, frame, to: sockets, io: io)
            }
        } else {
            var byGroup: [Group: [(EventID, OutboundFrame)]] = [:]
            for (stored, frame) in batch {
                if stored.id > lastDelivered.id { lastDelivered = stored.cursor }
                for group in stored.event.groups where members[group] != nil {
                    byGroup[group, default: []].append((stored.id, frame))
                }
            }
            var frames: [OutboundFrame] = []
            for (group, events) in byGroup {
                guard let sockets = members[group] else { continue }
                sent += send(events, to: sockets, frames: &frames, io: io)
            }
        }
        metrics.framesSent(sent)
        metrics.delivered(through: lastDelivered.id.rawValue)
    }

    /// Hands one event to each of `sockets` through its machine; the frames sent. The batch path
    /// below for one event, without its list of frames per socket (a retain and a release per
    /// socket, in the hot loop of fan-out).
    private func send(_ id: EventID, _ frame: OutboundFrame, to sockets: Set<SocketID>, io: any SocketIO) -> Int {
        var sent = 0
        for socket in sockets {
            guard let index = connections.index(forKey: socket),
                let sending = live(id, frame, socket, at: index, io: io), io.send(sending, to: socket)
            else { continue }
            sent += 1
        }
        return sent
    }

    /// What the machine of `socket` (at `index` in `connections`) does with a live event: the frame
    /// to send, or `nil` when it buffers or skips it, or closes (it then skips every later event).
    @inline(__always)
    private func live(
        _ id: EventID, _ frame: OutboundFrame, _ socket: SocketID, at index: Dictionary<SocketID, Entry>.Index,
        io: any SocketIO
    ) -> OutboundFrame? {
        switch connections.values[index].machine.live(id, frame, bytes: frame.count) {
        case .send(let frame): return frame
        case .buffered, .skip: return nil
        case .close(let code, let reason):
            replayBufferOverflowed(socket, code: code, reason: reason, io: io)
            return nil
        }
    }

    /// Hands `events` (one group's, in order) to each of `sockets` through its machine; the
    /// frames sent. `frames` is scratch space, kept between calls.
    private func send(
        _ events: some Collection<(EventID, OutboundFrame)>, to sockets: Set<SocketID>, frames: inout [OutboundFrame],
        io: any SocketIO
    ) -> Int {
        var sent = 0
        for socket in sockets {
            guard let index = connections.index(forKey: socket) else { continue }
            frames.removeAll(keepingCapacity: true)
            for (id, frame) in events {
                if let sending = live(id, frame, socket, at: index, io: io) { frames.append(sending) }
            }
            switch frames.count {
            case 0: continue
            case 1: if io.send(frames[0], to: socket) { sent += 1 }
            default: sent += io.send(frames, to: socket)
            }
        }
        return sent
    }

    /// Closes with 4001 the sockets whose tokens `logout` revoked (they must log in again); a
    /// socket of a login made after it stays, also when this node hears of the logout later.
    public func closeSockets(revokedBy logout: Logout, io: any SocketIO) {
        let user = logout.userID
        // Sockets still authenticating may have read the credentials before the logout revoked
        // them; `admit` refuses those (their machine has no user yet, so the loop below skips them).
        logouts.record(logout, oldestPending: oldestAuthenticating)
        // Skips sockets already closing: a local logout and the session watcher both ask.
        for socket in userSockets[user] ?? [] {
            guard let entry = connections[socket], entry.machine.userID == user, logout.revokes(entry.epoch),
                entry.machine.phase != .closing
            else { continue }
            connections[socket]?.machine.closing()
            io.close(socket, code: 4001, reason: "logged out")
        }
    }

    /// The smallest `openedAtLogout` of a socket still authenticating (`LogoutLedger.record`).
    func oldestAuthenticating() -> UInt64? {
        connections.values.lazy.filter { $0.machine.phase == .authenticating }.map(\.openedAtLogout).min()
    }

    /// Closes every socket with `code` so clients reconnect and resume.
    public func closeAll(code: Int, reason: String, io: any SocketIO) {
        for socket in Array(connections.keys) {
            connections[socket]?.machine.closing()
            io.close(socket, code: code, reason: reason)
        }
    }

    /// The store's history went back (a restore or a failover): what sockets were sent may not exist
    /// any more. Every socket is closed with 1012 so that it resumes (and gets `reset`), and live
    /// delivery restarts from `newest`.
    public func rewound(to newest: EventCursor, io: any SocketIO) {
        lastDelivered = newest
        metrics.delivered(through: newest.id.rawValue)
        receiptsRewound()
        closeAll(code: 1012, reason: "service restart", io: io)
    }

    // MARK: WebSocketDelegate

    public func socketOpened(_ socket: SocketID, request: HTTPRequest, io: any SocketIO) {
        let target = Redaction.redactedTarget(path: request.path, query: request.query)
        let machine = Connection(
            maxBufferedEvents: configuration.limits.maxReplayBufferEvents,
            maxBufferedBytes: configuration.limits.maxReplayBufferBytes)
        let limits = configuration.limits
        connections[socket] = Entry(
            target: target, machine: machine, openedAtLogout: logouts.count,
            budget: FrameBudget(perSecond: limits.maxFramesPerSecond, burst: limits.frameBurst))
        metrics.socketOpened(kind: "pending")
        logger.info("socket opened", ["socket": "\(socket)", "target": target, "remote": request.remoteAddress])
        startAuthentication(socket, Handshake(request), io: io)
    }

    public func socketReceived(_ socket: SocketID, text: String, io: any SocketIO) {
        // One look-up for both checks: every app ping of every socket comes through here.
        let now = elapsed()
        switch connections[socket]?.admitFrame(at: now) {
        case .taken(let user)?:
            if let user, !takeUserFrame(user, at: now) {
                frameBudgetExceeded(socket, byUser: true, io: io)
                return
            }
        case .overBudget?:
            frameBudgetExceeded(socket, io: io)
            return
        case .ignored?, nil:
            return
        }
        switch ClientFrame.parse(text) {
        case .ping:
            if connections[socket]?.machine.ping() == .pong { io.send(pongFrame(), to: socket) }
        case .seen(let reports): received(reports, on: socket)  // Hub+Receipts
        case .ignored: break  // anything else a client sends is ignored (SPEC §4)
        }
    }

    public func socketReceived(_ socket: SocketID, binary: [UInt8], io: any SocketIO) {
        io.close(socket, code: 1003, reason: "binary frames are not supported")
    }

    public func socketClosed(_ socket: SocketID, close: WebSocketClose, io: any SocketIO) {
        guard let entry = connections.removeValue(forKey: socket) else { return }
        receiptsClosed(entry)
        if let group = entry.machine.group {
            members[group]?.remove(socket)
            if members[group]?.isEmpty == true { members[group] = nil }
            if let user = entry.machine.userID {
                userSockets[user]?.remove(socket)
                if userSockets[user]?.isEmpty ?? true {
                    userSockets[user] = nil
                    userFrameBudgets[user] = nil
                }
            }
            metrics.socketClosed(kind: group.kind)
        } else {
            metrics.socketClosed(kind: "pending")
        }
        if close.wasSlowConsumer { metrics.slowConsumerClosed() }
        logger.info("socket closed", [
            "socket": "\(socket)", "target": entry.target, "code": close.code.map(String.init) ?? "none",
            "by": close.initiatedByServer ? "server" : "client",
        ])
    }

    func join(_ socket: SocketID, _ group: Group) { members[group, default: []].insert(socket) }
    public var newestDelivered: EventCursor { lastDelivered }
    var maxReplayEvents: Int { configuration.maxReplayEvents }
    var maxReplayBytes: Int { configuration.maxReplayBytes }

    /// Open sockets (for tests and shutdown logs).
    public var openSocketCount: Int { connections.count }
}
