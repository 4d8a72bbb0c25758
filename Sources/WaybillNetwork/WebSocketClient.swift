import Foundation

/// A WebSocket client connection over lws, driven by a `WebSocketClientLoop`.
///
/// ```swift
/// let loop = try WebSocketClientLoop()
/// let ws = try await WebSocketClient.connect(host: "127.0.0.1", port: 8080, path: "/ws/orders/?ticket=t",
///                                            on: loop)
/// ws.send(text: #"{"type":"ping"}"#)
/// for await event in ws.events { … }        // ends after `.closed`
/// ```
/// Every method may be called from any thread; the work runs on the loop's thread.
public final class WebSocketClient: Sendable {
    private let loop: WebSocketClientLoop
    private let connection: ClientConnection
    /// Messages in arrival order, then one `.closed`, then the end. Single consumer.
    public let events: AsyncStream<WebSocketClientEvent>

    private init(loop: WebSocketClientLoop, connection: ClientConnection, events: AsyncStream<WebSocketClientEvent>) {
        self.loop = loop
        self.connection = connection
        self.events = events
    }

    /// A client dropped while open says goodbye with 1001 (its `events` then end).
    deinit {
        let core = loop.core
        let connection = self.connection
        core.loop.post { core.close(connection, code: 1001, reason: "going away") }
    }

    /// Opens a WebSocket to `host:port` and finishes the handshake.
    ///
    /// Host names are resolved off the loop's thread (lws would block it); "localhost" means
    /// 127.0.0.1.
    /// - Parameters:
    ///   - path: the request target, including any query (`/ws/orders/?token=…`).
    ///   - headers: extra handshake headers, e.g. `("Authorization", "Bearer …")`.
    ///   - maxMessageBytes: the largest message taken from the server (16 MiB); a bigger one closes
    ///     the socket with 1009 instead of growing memory.
    /// - Throws: `WebSocketClientError` when the connection fails, the server refuses the
    ///   handshake, or `timeout` passes first.
    public static func connect(
        host: String,
        port: Int,
        path: String,
        headers: [(String, String)] = [],
        on loop: WebSocketClientLoop,
        timeout: Duration = .seconds(5),
        maxMessageBytes: Int = 16 << 20
    ) async throws -> WebSocketClient {
        // `Int32(port)` on the service thread trapped for a port past 2³¹ (a mistyped URL).
        guard (1...65_535).contains(port) else { throw WebSocketClientError(.connectFailed, "port \(port) is out of range") }
        // The lookup counts in `timeout` (it had none: 10–30 s where no DNS server answers).
        let started = ContinuousClock.now
        let address = try await HostResolver.resolve(host, within: timeout)
        let (events, continuation) = AsyncStream.makeStream(of: WebSocketClientEvent.self)
        let connection = ClientConnection(
            address: address,
            port: port,
            path: path.isEmpty ? "/" : path,
            hostHeader: HostHeader.value(host: host, port: port),
            headers: headers,
            events: continuation,
            maxMessageBytes: maxMessageBytes
        )
        let core = loop.core
        // Until a deadline, not for what is left from when the task first runs: a task started late
        // (a starved pool) would otherwise stretch the caller's timeout by its delay.
        let deadline = started + timeout
        let timer = Task {
            try await Task.sleep(until: deadline, clock: .continuous)
            core.loop.post { core.connectTimedOut(connection) }
        }
        defer { timer.cancel() }
        try await withCheckedThrowingContinuation { (resume: CheckedContinuation<Void, any Error>) in
            let posted = core.loop.post {
                connection.connectContinuation = resume
                core.start(connection)
            }
            if !posted { resume.resume(throwing: WebSocketClientError(.connectFailed, "the client loop has ended")) }
        }
        return WebSocketClient(loop: loop, connection: connection, events: events)
    }

    /// Queues a text message.
    public func send(text: String) { send(OutboundFrame(text: text)) }

    /// Queues a binary message.
    public func send(binary: [UInt8]) { send(OutboundFrame(binary: binary)) }

    private func send(_ frame: OutboundFrame) {
        let core = loop.core
        let connection = self.connection
        core.loop.post { core.send(frame, on: connection) }
    }

    /// Sends what is queued, then closes with `code` and `reason`; `events` then ends with
    /// `.closed(code: code, …)` (or the server's code if it closed first).
    public func close(code: Int = 1000, reason: String = "") {
        let core = loop.core
        let connection = self.connection
        core.loop.post { core.close(connection, code: code, reason: reason) }
    }
}

/// What a `WebSocketClient` receives.
public enum WebSocketClientEvent: Sendable, Equatable {
    /// A complete text message.
    case text(String)
    /// A complete binary message.
    case binary([UInt8])
    /// The connection ended. `code` is the close code received from the server (or the one this
    /// client sent), `nil` when the connection dropped without a close frame.
    case closed(code: Int?, reason: String)
}

/// Why `WebSocketClient.connect` failed.
public struct WebSocketClientError: Error, CustomStringConvertible, Equatable {
    /// The kind of failure; new kinds may be added.
    public struct Code: Hashable, Sendable {
        fileprivate let rawValue: Int
        /// No TCP connection, an unresolvable host, or a refused/failed handshake.
        public static let connectFailed = Code(rawValue: 1)
        /// The handshake did not finish within the timeout.
        public static let timedOut = Code(rawValue: 2)
    }

    /// The kind of failure.
    public let code: Code
    /// Details from lws or the resolver, for logs.
    public let description: String

    init(_ code: Code, _ description: String) {
        self.code = code
        self.description = description
    }
}
