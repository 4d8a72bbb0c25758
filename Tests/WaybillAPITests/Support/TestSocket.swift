import Foundation
import Testing
import WaybillAPI
import WaybillNetwork

/// A WebSocket to the test server through the project's own client (libwebsockets client mode),
/// with bounded waits for frames.
actor TestSocket {
    enum Received: Equatable, Sendable {
        case frame([String: String])
        case closed(Int?)
    }

    private let client: WebSocketClient
    private var inbox: [WebSocketClientEvent] = []
    private var pump: Task<Void, Never>?
    /// Text frames read so far, parsed.
    private(set) var frames: [JSONFrame] = []
    private(set) var closeCode: Int??

    init(client: WebSocketClient) {
        self.client = client
    }

    /// Moves the client's events into `inbox` (the stream has one consumer: this task).
    private func startPump() {
        let events = client.events
        pump = Task { [weak self] in
            for await event in events { await self?.push(event) }
        }
    }

    private func push(_ event: WebSocketClientEvent) { inbox.append(event) }

    static let loop = Result { try WebSocketClientLoop() }

    /// Opens `/ws/orders/` with the given query and waits for the upgrade.
    static func open(port: Int, query: String) async throws -> TestSocket {
        let client = try await WebSocketClient.connect(
            host: "127.0.0.1", port: port, path: "/ws/orders/?" + query, on: try loop.get(), timeout: .seconds(20))
        let socket = TestSocket(client: client)
        await socket.startPump()
        return socket
    }

    /// The next text frame as a JSON object, or `nil` if the socket closed or `timeout` passed first.
    func next(timeout: Duration = .seconds(20)) async -> JSONFrame? {
        guard closeCode == nil else { return nil }
        let event = await withTimeout(timeout)
        switch event {
        case .text(let text)?:
            let object = JSONFrame((try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? ["raw": text])
            frames.append(object)
            return object
        case .closed(let code, _)?:
            closeCode = .some(code)
            return nil
        case .binary?:
            return JSONFrame(["binary": true])
        case nil:
            return nil
        }
    }

    /// The next frame that is an order event (skips `pong`).
    func nextEvent(timeout: Duration = .seconds(20)) async -> JSONFrame? {
        while let frame = await next(timeout: timeout) {
            if let type = frame["type"] as? String, type.hasPrefix("order_") { return frame }
        }
        return nil
    }

    /// Waits for the close and returns its code (`nil` = dropped without a close frame, or timed out).
    func closed(timeout: Duration = .seconds(20)) async -> Int? {
        let deadline = ContinuousClock.now + timeout
        while closeCode == nil, ContinuousClock.now < deadline, !Task.isCancelled {
            _ = await next(timeout: deadline - .now)
        }
        return closeCode ?? nil
    }

    var isClosed: Bool { closeCode != nil }

    func send(_ text: String) { client.send(text: text) }

    func close() { client.close(code: 1000, reason: "") }

    /// The next event from the inbox, polling until `timeout` passes.
    private func withTimeout(_ timeout: Duration) async -> WebSocketClientEvent? {
        let deadline = ContinuousClock.now + timeout
        while inbox.isEmpty {
            guard ContinuousClock.now < deadline, !Task.isCancelled else { return nil }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return inbox.removeFirst()
    }
}

extension TestServer {
    func socket(token: String, query extra: String = "") async throws -> TestSocket {
        try await TestSocket.open(port: port, query: "token=\(token)" + (extra.isEmpty ? "" : "&" + extra))
    }

    /// A ticket-authenticated socket, as the web panel and the driver client connect.
    func socket(ticketFor token: String, query extra: String = "") async throws -> TestSocket {
        let ticket = try await request("POST", "/api/ws-ticket", token: token).object.string("ticket") ?? ""
        return try await TestSocket.open(port: port, query: "ticket=\(ticket)" + (extra.isEmpty ? "" : "&" + extra))
    }

    /// A socket that has already received its `connected` frame.
    func connectedSocket(token: String, query: String = "") async throws -> (TestSocket, JSONFrame) {
        let socket = try await socket(token: token, query: query)
        let connected = try #require(await socket.next())
        try #require(connected["type"] as? String == "connected")
        return (socket, connected)
    }
}

/// A parsed text frame. `@unchecked Sendable`: the dictionary is never mutated after parsing.
struct JSONFrame: @unchecked Sendable {
    let object: [String: Any]
    init(_ object: [String: Any]) { self.object = object }
    subscript(_ key: String) -> Any? { object[key] }
    /// An integer field (JSON numbers arrive as NSNumber).
    func int(_ key: String) -> Int64? { (object[key] as? NSNumber)?.int64Value }
}
