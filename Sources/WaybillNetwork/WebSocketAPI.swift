/// A WebSocket connection's identity. Unique for the life of the process (never reused, unlike lws `wsi`s).
public struct SocketID: Hashable, Sendable, CustomStringConvertible {
    /// The number; the server counts up from 1.
    public let rawValue: UInt64
    /// Wraps a number (tests, logs).
    public init(_ rawValue: UInt64) { self.rawValue = rawValue }
    /// `ws-<n>`, for logs.
    public var description: String { "ws-\(rawValue)" }
}

/// A text or binary message encoded once and shared by every socket it is sent to.
///
/// The bytes sit behind the headroom lws needs in front of a payload, so sending to N sockets
/// copies nothing. Immutable after `init`, hence `Sendable`.
public final class OutboundFrame: Sendable {
    // Implementation detail of WaybillNetwork: storage with LWS_PRE headroom.
    let storage: FrameStorage
    /// Whether it goes out as a binary message (else text).
    public let isBinary: Bool
    /// A text message: the UTF-8 bytes of `text`, copied once.
    public init(text: String) {
        storage = FrameStorage(text.utf8)
        isBinary = false
    }
    /// A text message from bytes that are already UTF-8 (an event frame), copied once. The bytes
    /// are not checked: a text message must be valid UTF-8, so pass only what was made as text.
    public init(utf8Text bytes: [UInt8]) {
        storage = FrameStorage(bytes)
        isBinary = false
    }
    /// A binary message, copied once.
    public init(binary bytes: [UInt8]) {
        storage = FrameStorage(bytes)
        isBinary = true
    }
    /// Payload length in bytes.
    public var count: Int { storage.count }
    /// A copy of the payload (for tests and diagnostics; the send path never copies it).
    public var bytes: [UInt8] { storage.bytes }
}

/// Why a socket closed, as the delegate learns it.
public struct WebSocketClose: Sendable, Equatable {
    /// The close code sent or received; `nil` when the connection just dropped (no close frame).
    /// For server-initiated closes it is the code the server chose, even when a stuck peer never
    /// got the frame (slow consumers are cut off by a deadline); 1005 if the peer's close frame
    /// had no code.
    public var code: Int?
    /// Whether the server chose to close (including slow-consumer closes). Heartbeat drops are
    /// made by lws, which does not report them: they look like a peer drop (`code: nil`, `false`).
    public var initiatedByServer: Bool
    /// The socket went over its outbound limit and was closed with `slowConsumerCloseCode`.
    public var wasSlowConsumer: Bool
    /// Makes a close report (tests compare against these).
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
    /// Queues `frames` on `socket` in order, stopping at the first that `send(_:to:)` would refuse;
    /// returns how many were queued. The server's version looks the socket up once.
    @discardableResult func send(_ frames: [OutboundFrame], to socket: SocketID) -> Int
    /// Sends what is queued, then closes with `code` and `reason` (≤ 123 bytes).
    func close(_ socket: SocketID, code: Int, reason: String)
    /// Whether `socket` is open and not closing.
    func isOpen(_ socket: SocketID) -> Bool
    /// Bytes queued on `socket` and not yet written.
    func queuedBytes(_ socket: SocketID) -> Int
}

extension SocketIO {
    /// Frame by frame (test doubles).
    @discardableResult public func send(_ frames: [OutboundFrame], to socket: SocketID) -> Int {
        var sent = 0
        for frame in frames {
            guard send(frame, to: socket) else { break }
            sent += 1
        }
        return sent
    }
}
