import Synchronization
import WaybillNetwork

/// A WebSocket delegate for tests: records every call and echoes messages back.
///
/// A text message "close:<code>" makes the server close that socket with `<code>`; an upgrade
/// with `?reject=<code>` is closed with `<code>` right after it opens.
final class RecordingDelegate: WebSocketDelegate, Sendable {
    enum Event: Equatable, Sendable {
        case opened(SocketID, path: String, query: [String], authorization: String?)
        case text(SocketID, String)
        case binary(SocketID, [UInt8])
        case closed(SocketID, WebSocketClose)
    }

    private let log = Mutex<[Event]>([])
    /// When each socket's open and close were reported, on the service thread: a test that times a
    /// drop measures the server, not how late its own task woke to start or to look (a starved pool).
    private let openTimes = Mutex<[SocketID: ContinuousClock.Instant]>([:])
    private let closeTimes = Mutex<[SocketID: ContinuousClock.Instant]>([:])

    func openedAt(_ socket: SocketID) -> ContinuousClock.Instant? { openTimes.withLock { $0[socket] } }
    func closedAt(_ socket: SocketID) -> ContinuousClock.Instant? { closeTimes.withLock { $0[socket] } }

    /// From the socket's open to its close, as the server saw them (`nil` until both were reported).
    func openFor(_ socket: SocketID) -> Duration? {
        guard let opened = openedAt(socket), let closed = closedAt(socket) else { return nil }
        return opened.duration(to: closed)
    }

    var events: [Event] { log.withLock { $0 } }

    var openedSockets: [SocketID] {
        events.compactMap { if case .opened(let id, _, _, _) = $0 { id } else { nil } }
    }

    func closeReport(for socket: SocketID) -> WebSocketClose? {
        events.lazy.compactMap { if case .closed(let id, let close) = $0, id == socket { close } else { nil } }.first
    }

    func socketOpened(_ socket: SocketID, request: HTTPRequest, io: any SocketIO) {
        let now = ContinuousClock.now
        openTimes.withLock { $0[socket] = now }
        let query = request.query.map { "\($0.name)=\($0.value)" }
        log.withLock {
            $0.append(
                .opened(socket, path: request.path, query: query, authorization: request.headers["authorization"])
            )
        }
        // Authentication happens after the handshake: `?reject=<code>` plays a refused token.
        if let code = request.queryValue("reject").flatMap({ Int($0) }) {
            io.close(socket, code: code, reason: "rejected")
        }
    }

    func socketReceived(_ socket: SocketID, text: String, io: any SocketIO) {
        log.withLock { $0.append(.text(socket, text)) }
        if text.hasPrefix("close:"), let code = Int(text.dropFirst(6)) {
            io.close(socket, code: code, reason: "closed by test")
        } else {
            io.send(OutboundFrame(text: text), to: socket)
        }
    }

    func socketReceived(_ socket: SocketID, binary: [UInt8], io: any SocketIO) {
        log.withLock { $0.append(.binary(socket, binary)) }
        io.send(OutboundFrame(binary: binary), to: socket)
    }

    func socketClosed(_ socket: SocketID, close: WebSocketClose, io: any SocketIO) {
        let now = ContinuousClock.now
        closeTimes.withLock { $0[socket] = now }
        log.withLock { $0.append(.closed(socket, close)) }
    }
}

/// Reads events until one matches, or nil when the stream ends or `timeout` passes.
func nextEvent(
    _ client: WebSocketClient,
    timeout: Duration = .seconds(20),
    where matches: @escaping @Sendable (WebSocketClientEvent) -> Bool = { _ in true }
) async -> WebSocketClientEvent? {
    await withTaskGroup(of: WebSocketClientEvent?.self) { group in
        group.addTask {
            for await event in client.events where matches(event) { return event }
            return nil
        }
        group.addTask {
            try? await Task.sleep(for: timeout)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}
