import Synchronization
import WaybillClient

/// A WebSocket transport the test plays the server of: it sees every connect and pushes frames and closes.
final class FakeEventTransport: EventTransport, Sendable {
    private struct State {
        var connections: [FakeConnection] = []
        var failuresToInject = 0
        var attempts: [SocketRequest] = []
    }

    private let state = Mutex(State())

    /// Every connect attempt, successful or not.
    var attempts: [SocketRequest] { state.withLock { $0.attempts } }
    /// Sockets opened so far, oldest first.
    var connections: [FakeConnection] { state.withLock { $0.connections } }
    /// The newest socket.
    var current: FakeConnection? { connections.last }

    /// Makes the next `count` connects throw, as an unreachable server would.
    func failNextConnects(_ count: Int) { state.withLock { $0.failuresToInject = count } }

    func connect(_ request: SocketRequest) async throws -> any EventConnection {
        try state.withLock { state in
            state.attempts.append(request)
            if state.failuresToInject > 0 {
                state.failuresToInject -= 1
                throw WaybillClientError.unreachable
            }
            let connection = FakeConnection(request: request)
            state.connections.append(connection)
            return connection
        }
    }
}

/// One fake socket: `receive` plays a server frame, `drop` a close.
final class FakeConnection: EventConnection, Sendable {
    let request: SocketRequest
    let messages: AsyncStream<SocketMessage>
    private let continuation: AsyncStream<SocketMessage>.Continuation
    private let log = Mutex<(sent: [String], closedWith: Int?)>(([], nil))
    private let answersPings = Mutex(true)

    /// Makes the socket silent, like a half-open one: pings go unanswered.
    func goSilent() { answersPings.withLock { $0 = false } }

    init(request: SocketRequest) {
        self.request = request
        (messages, continuation) = AsyncStream.makeStream(of: SocketMessage.self)
    }

    var sent: [String] { log.withLock { $0.sent } }
    var closedByClientWith: Int? { log.withLock { $0.closedWith } }

    /// The server sends `text`.
    func receive(_ text: String) { continuation.yield(.text(text)) }

    /// The cursor the fake server gives event `id`: the id plus a check that differs per database `epoch`.
    static func cursor(_ id: Int64, epoch: Int = 0) -> String { "\(id)-e\(epoch)" }

    /// The server sends the `connected` frame (with a cursor unless `epoch` is `nil`, as older servers do).
    func receiveConnected(newest: Int64 = 10, epoch: Int? = 0) {
        let cursor = epoch.map { #","cursor":"\#(Self.cursor(newest, epoch: $0))""# } ?? ""
        receive(#"{"type":"connected","user_id":7,"groups":["driver_7"],"event_id":\#(newest)\#(cursor)}"#)
    }

    /// The server sends an order event (with a cursor unless `epoch` is `nil`).
    func receiveEvent(_ type: String = "order_status_changed", order: Int64, eventID: Int64, epoch: Int? = 0) {
        let cursor = epoch.map { #","cursor":"\#(Self.cursor(eventID, epoch: $0))""# } ?? ""
        receive(
            #"{"type":"\#(type)","id":\#(order),"order_id":\#(order),"number":"x","driver_id":7,"event_id":\#(eventID)\#(cursor)}"#
        )
    }

    /// The server (or the network) closes the socket with `code` (`nil`: no close frame).
    func drop(code: Int?) {
        continuation.yield(.closed(code: code))
        continuation.finish()
    }

    func send(_ text: String) async {
        log.withLock { $0.sent.append(text) }
        if text == #"{"type":"ping"}"#, answersPings.withLock({ $0 }) { receive(#"{"type":"pong"}"#) }
    }

    func close(code: Int) async {
        log.withLock { $0.closedWith = code }
        continuation.finish()
    }
}
