public import WaybillClient
public import WaybillNetwork
import Foundation

/// `EventTransport` over the project's libwebsockets client: Linux has no `URLSessionWebSocketTask`.
public struct LwsEventTransport: EventTransport {
    private let loop: WebSocketClientLoop

    /// - Parameter loop: the client loop (one thread) that owns every socket this transport opens.
    public init(loop: WebSocketClientLoop) { self.loop = loop }

    /// - Throws: ``UnsupportedScheme`` for anything but `ws://`: this client has no TLS, and a `wss://`
    ///   URL sent in the clear would carry the socket's ticket in plain text.
    public func connect(_ request: SocketRequest) async throws -> any EventConnection {
        let url = request.url
        guard url.scheme?.lowercased() == "ws" else { throw UnsupportedScheme(scheme: url.scheme ?? "") }
        let client = try await WebSocketClient.connect(
            host: url.host ?? "127.0.0.1", port: url.port ?? 80,
            path: request.pathAndQuery, headers: request.headers.map { ($0.key, $0.value) }, on: loop)
        return LwsEventConnection(client: client)
    }
}

/// The URL's scheme is not `ws` (`wss` needs TLS, which this transport does not have).
public struct UnsupportedScheme: Error, CustomStringConvertible {
    public let scheme: String
    public var description: String { "only ws:// URLs are supported (got \(scheme)://; this transport has no TLS)" }
}

/// One open socket: text frames and the close code, as `WaybillClient` expects them.
struct LwsEventConnection: EventConnection {
    let client: WebSocketClient
    let messages: AsyncStream<SocketMessage>

    init(client: WebSocketClient) {
        self.client = client
        messages = AsyncStream { continuation in
            let pump = Task {
                for await event in client.events {
                    switch event {
                    case .text(let text): continuation.yield(.text(text))
                    case .binary: continue
                    case .closed(let code, _): continuation.yield(.closed(code: Self.codeAsSent(code)))
                    }
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in pump.cancel() }
        }
    }

    /// The close code the server sent, as far as it can be told: libwebsockets 4.1 rewrites a
    /// received 1012, 1013 or 1014 (and the unassigned 1016–2999) to 1002 before this client sees
    /// it. A Waybill server never sends 1002, and its 1012 (restart, history rewound) and 1013
    /// (busy, over a limit) both ask the client to come back later, not sooner
    /// (`DriverSession.StateMachine.waitingCloseCodes`): read as 1002, a wake-up cut that backoff
    /// short, as a reconnect storm would (found by a review, 2026-12-07).
    static func codeAsSent(_ code: Int?) -> Int? { code == 1002 ? 1013 : code }

    func send(_ text: String) async { client.send(text: text) }
    func close(code: Int) async { client.close(code: code) }
}
