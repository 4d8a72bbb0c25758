import CWebSockets

/// One client WebSocket's state on the client loop's service thread (never touched elsewhere).
///
/// lws gets an unretained pointer to it as the wsi's `opaque_user_data`; `ClientLoopCore` keeps
/// it alive in `connections` until the terminal callback (`CLIENT_CLOSED` or
/// `CLIENT_CONNECTION_ERROR`, exactly one of which lws delivers).
final class ClientConnection: @unchecked Sendable {  // safe: mutable state only on the client loop's thread
    enum State { case idle, connecting, open, closed }

    let address: String
    let port: Int
    let path: String
    let hostHeader: String
    let headers: [(String, String)]
    let events: AsyncStream<WebSocketClientEvent>.Continuation

    var state = State.idle
    var wsi: OpaquePointer?
    var connectContinuation: CheckedContinuation<Void, any Error>?

    // Outbound.
    var queue: [OutboundFrame] = []
    var pendingClose: (code: Int, reason: String)?
    var closeSent = false

    // Inbound.
    var inbound: MessageReassembler

    // How it ended.
    var closeCode: Int?
    var closeReason = ""

    init(
        address: String,
        port: Int,
        path: String,
        hostHeader: String,
        headers: [(String, String)],
        events: AsyncStream<WebSocketClientEvent>.Continuation,
        maxMessageBytes: Int
    ) {
        inbound = MessageReassembler(maxBytes: maxMessageBytes)
        self.address = address
        self.port = port
        self.path = path
        self.hostHeader = hostHeader
        self.headers = headers
        self.events = events
    }

    /// Resumes `connect` once, with success or the error.
    func resumeConnect(_ result: Result<Void, WebSocketClientError>) {
        guard let continuation = connectContinuation else { return }
        connectContinuation = nil
        continuation.resume(with: result.mapError { $0 as any Error })
    }

    /// Reports the end once: resumes a pending `connect` with `error`, or emits `.closed`.
    func finish(error: WebSocketClientError) {
        guard state != .closed else { return }
        let wasOpen = state == .open
        state = .closed
        queue = []
        inbound.reset()
        resumeConnect(.failure(error))
        if wasOpen { events.yield(.closed(code: closeCode, reason: closeReason)) }
        events.finish()
    }
}
