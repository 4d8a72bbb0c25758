/// A WebSocket connection's identity. Unique for the life of the process (never reused, unlike lws `wsi`s).
public struct SocketID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "ws-\(rawValue)" }
}

/// A text or binary message encoded once and shared by every socket it is sent to.
///
/// The bytes sit behind the headroom lws needs in front of a payload, so sending to N sockets
/// copies nothing. Immutable after `init`, hence `Sendable`.
public final class OutboundFrame: Sendable {
    // Implementation detail of WaybillNetwork: storage with LWS_PRE headroom.
    let storage: FrameStorage
    public let isBinary: Bool
    public init(text: String) {
        storage = FrameStorage(text.utf8)
        isBinary = false
    }
    public init(binary bytes: [UInt8]) {
        storage = FrameStorage(bytes)
        isBinary = true
    }
    /// Payload length in bytes.
    public var count: Int { storage.count }
}

/// Why a socket closed, as the delegate learns it.
public struct WebSocketClose: Sendable, Equatable {
    /// The close code sent or received; `nil` when the connection just dropped (no close frame).
    public var code: Int?
    /// Whether the server chose to close (including slow-consumer and heartbeat closes).
    public var initiatedByServer: Bool
    /// The socket went over its outbound limit and was closed with `slowConsumerCloseCode`.
    public var wasSlowConsumer: Bool
    public init(code: Int?, initiatedByServer: Bool, wasSlowConsumer: Bool = false) {
        self.code = code
        self.initiatedByServer = initiatedByServer
        self.wasSlowConsumer = wasSlowConsumer
    }
}

/// The application's side of server WebSockets. Every method is called on the service thread.
///
/// `io` is only valid during the call; use `HTTPServer.execute(_:)` to act on sockets later.
public protocol WebSocketDelegate: AnyObject {
    /// A socket finished its handshake. `request` carries the upgrade's path, query and headers.
    func socketOpened(_ socket: SocketID, request: HTTPRequest, io: any SocketIO)
    /// A complete text message arrived (at most `maxMessageBytes`; larger ones close the socket with 1009).
    func socketReceived(_ socket: SocketID, text: String, io: any SocketIO)
    /// A complete binary message arrived.
    func socketReceived(_ socket: SocketID, binary: [UInt8], io: any SocketIO)
    /// The socket is gone; `socket` is never seen again.
    func socketClosed(_ socket: SocketID, close: WebSocketClose, io: any SocketIO)
}

/// Socket operations, usable only on the service thread (inside delegate calls and `execute` bodies).
public protocol SocketIO {
    /// Queues `frame` on `socket`. Returns `false` if the socket is unknown or closing, or if the
    /// frame took it over its outbound limit (it is then being closed as a slow consumer).
    @discardableResult func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool
    /// Sends what is queued, then closes with `code` and `reason` (≤ 123 bytes).
    func close(_ socket: SocketID, code: Int, reason: String)
    /// Whether `socket` is open and not closing.
    func isOpen(_ socket: SocketID) -> Bool
    /// Bytes queued on `socket` and not yet written.
    func queuedBytes(_ socket: SocketID) -> Int
}
