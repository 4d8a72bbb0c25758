import Foundation
public import WaybillDomain
public import WaybillNetwork
public import WaybillObservability
public import WaybillStorage

/// Group membership of live sockets and fan-out of events, in `event_id` order (SPEC §4).
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

        public init(maxReplayEvents: Int = 10_000, maxReplayBytes: Int = 512 << 10) {
            self.maxReplayEvents = maxReplayEvents
            self.maxReplayBytes = maxReplayBytes
        }
    }

    /// One socket's place in the protocol.
    final class Connection {
        enum Phase {
            case authenticating
            /// Replay query running: live events wait in `buffer`, then go out after the replay.
            case replaying
            case live
        }
        let target: String
        var phase: Phase = .authenticating
        /// Live events that arrived while replaying (a stored property, so appends do not copy).
        var buffer: [(EventID, OutboundFrame)] = []
        var group: Group?
        var userID: UserID?
        /// Highest event id queued on this socket: nothing at or below it is sent again.
        var lastSent: EventID = .zero
        init(target: String) { self.target = target }
    }

    let authenticator: any SocketAuthenticating
    let store: any OrderStore
    let metrics: Metrics
    let logger: Logger
    let configuration: Configuration
    private var connections: [SocketID: Connection] = [:]
    private var members: [Group: Set<SocketID>] = [:]
    /// The newest event the hub has delivered: the `event_id` and `cursor` of `connected` frames.
    private var lastDelivered: EventCursor
    /// Runs a body on the service thread; set once by `WaybillServer` after the HTTP server exists.
    public nonisolated(unsafe) var execute: @Sendable (@escaping @Sendable (any SocketIO) -> Void) -> Void = { _ in }

    static let pongFrame = OutboundFrame(text: EventFrame.pong)
    static let resetFrameShared = OutboundFrame(text: EventFrame.reset)

    public init(
        authenticator: any SocketAuthenticating, store: any OrderStore, metrics: Metrics, logger: Logger,
        startingAfter lastDelivered: EventCursor, configuration: Configuration = Configuration()
    ) {
        self.authenticator = authenticator
        self.store = store
        self.metrics = metrics
        self.logger = logger
        self.lastDelivered = lastDelivered
        self.configuration = configuration
    }

    // MARK: Fan-out

    /// Queues each event on every live socket of its groups (buffered for sockets still replaying).
    /// `frames` are encoded once per event, off the service thread.
    public func deliver(_ batch: [(StoredEvent, OutboundFrame)], io: any SocketIO) {
        var sent = 0
        for (stored, frame) in batch {
            if stored.id > lastDelivered.id { lastDelivered = stored.cursor }
            for group in stored.event.groups {
                guard let sockets = members[group] else { continue }
                for socket in sockets {
                    guard let connection = connections[socket] else { continue }
                    switch connection.phase {
                    case .live where stored.id > connection.lastSent:
                        connection.lastSent = stored.id
                        if io.send(frame, to: socket) { sent += 1 }
                    case .replaying:
                        connection.buffer.append((stored.id, frame))
                    default:
                        break
                    }
                }
            }
        }
        metrics.framesSent(sent)
    }

    /// Closes the sockets of `user` with 4001 (their tokens were revoked: they must log in again).
    public func closeSockets(of user: UserID, io: any SocketIO) {
        for (socket, connection) in connections where connection.userID == user {
            io.close(socket, code: 4001, reason: "logged out")
        }
    }

    /// Closes every socket with `code` so clients reconnect and resume (e.g. 1012 when the broker
    /// subscription was lost and live delivery can no longer be trusted).
    public func closeAll(code: Int, reason: String, io: any SocketIO) {
        for socket in connections.keys { io.close(socket, code: code, reason: reason) }
    }

    // MARK: WebSocketDelegate

    public func socketOpened(_ socket: SocketID, request: HTTPRequest, io: any SocketIO) {
        let target = Redaction.redactedTarget(path: request.path, query: request.query)
        connections[socket] = Connection(target: target)
        metrics.socketOpened(kind: "pending")
        logger.info("socket opened", ["socket": "\(socket)", "target": target, "remote": request.remoteAddress])
        let handshake = Handshake(request)
        Task { await self.authenticate(socket, handshake) }
    }

    public func socketReceived(_ socket: SocketID, text: String, io: any SocketIO) {
        guard let connection = connections[socket], connection.group != nil else { return }
        if ClientFrame.isPing(text) { io.send(Self.pongFrame, to: socket) }
        // Anything else a client sends is ignored (SPEC §4).
    }

    public func socketReceived(_ socket: SocketID, binary: [UInt8], io: any SocketIO) {
        io.close(socket, code: 1003, reason: "binary frames are not supported")
    }

    public func socketClosed(_ socket: SocketID, close: WebSocketClose, io: any SocketIO) {
        guard let connection = connections.removeValue(forKey: socket) else { return }
        if let group = connection.group {
            members[group]?.remove(socket)
            if members[group]?.isEmpty == true { members[group] = nil }
            metrics.socketClosed(kind: group.kind)
        } else {
            metrics.socketClosed(kind: "pending")
        }
        if close.wasSlowConsumer { metrics.slowConsumerClosed() }
        logger.info("socket closed", [
            "socket": "\(socket)", "target": connection.target, "code": close.code.map(String.init) ?? "none",
            "by": close.initiatedByServer ? "server" : "client",
        ])
    }

    func connection(_ socket: SocketID) -> Connection? { connections[socket] }
    func join(_ socket: SocketID, _ group: Group) { members[group, default: []].insert(socket) }
    public var newestDelivered: EventCursor { lastDelivered }
    var maxReplayEvents: Int { configuration.maxReplayEvents }
    var maxReplayBytes: Int { configuration.maxReplayBytes }

    /// Open sockets (for tests and shutdown logs).
    public var openSocketCount: Int { connections.count }
}
