/// Limits and timings of the server. Every field has a working default.
public struct HTTPServerConfiguration: Sendable {
    /// Interface to bind; "127.0.0.1" by default. "0.0.0.0" for all interfaces.
    public var host = "127.0.0.1"
    /// TCP port; 0 picks a free one (tests), read it back from `HTTPServer.port`.
    public var port = 8080
    /// Largest request body; bigger ones get 413 (with or without Content-Length).
    public var maxBodyBytes = 1 << 20
    /// Largest request header block; bigger ones are refused (431 or a close).
    public var maxHeaderBytes = 16 << 10
    /// Idle keep-alive connections are closed after this many seconds.
    public var keepAliveTimeoutSeconds = 5
    /// Paths that accept a WebSocket upgrade; other upgrade requests are refused.
    public var webSocketPaths: Set<String> = ["/ws/orders/", "/ws/orders"]
    /// Largest incoming WebSocket message; bigger ones close the socket with 1009.
    public var maxMessageBytes = 64 << 10
    /// Per-socket outbound queue limit; over it the socket is closed with `slowConsumerCloseCode`.
    public var maxQueuedBytesPerSocket = 1 << 20
    public var slowConsumerCloseCode = 4008
    /// Protocol ping interval; a socket that misses two pongs is dropped.
    public var pingIntervalSeconds = 25
    /// How long shutdown waits for sockets to flush and close before it stops anyway.
    public var shutdownDrainSeconds = 3
    public init() {}
}

// The implementation lives in the other files of this module:
//
//   public final class HTTPServer: Sendable {
//       public init(configuration: HTTPServerConfiguration, responder: any HTTPResponder,
//                   webSocketDelegate: (any WebSocketDelegate)?)
//       /// Binds and starts the service thread. Throws if the port cannot be bound.
//       public func start() throws
//       /// The bound port (after `start`).
//       public var port: Int { get }
//       /// Runs `body` on the service thread with socket access. Any thread.
//       public func execute(_ body: @escaping @Sendable (any SocketIO) -> Void)
//       /// Graceful stop: refuse new work, finish in-flight HTTP, close every socket with 1001
//       /// after flushing its queue, then destroy the context. Returns when the thread has ended.
//       public func shutdown() async
//       /// Per-request Swift objects alive now (for leak tests).
//       public var liveSessionObjects: Int { get }
//   }
