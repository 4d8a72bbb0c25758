#if canImport(Darwin)
    public import Foundation

    /// ``EventTransport`` over `URLSessionWebSocketTask` (Apple platforms).
    ///
    /// Not compiled on Linux, where corelibs' WebSocket support is incomplete; there the libwebsockets client
    /// of WaybillNetwork conforms to ``EventTransport`` instead.
    public struct URLSessionEventTransport: EventTransport {
        private let session: URLSession

        /// A transport over `session` (default: `URLSession.shared`).
        public init(session: URLSession = .shared) { self.session = session }

        public func connect(_ request: SocketRequest) async throws -> any EventConnection {
            var urlRequest = URLRequest(url: request.url)
            for (name, value) in request.headers { urlRequest.setValue(value, forHTTPHeaderField: name) }
            let task = session.webSocketTask(with: urlRequest)
            let connection = URLSessionEventConnection(task: task)
            task.resume()
            return connection
        }
    }

    /// One `URLSessionWebSocketTask`, read by a task that turns received messages into ``SocketMessage``s.
    final class URLSessionEventConnection: EventConnection, @unchecked Sendable {
        // @unchecked: `task` is thread-safe (URLSession's contract); the rest is immutable after init.
        private let task: URLSessionWebSocketTask
        let messages: AsyncStream<SocketMessage>
        private let reader: Task<Void, Never>

        init(task: URLSessionWebSocketTask) {
            self.task = task
            let (stream, continuation) = AsyncStream.makeStream(of: SocketMessage.self)
            messages = stream
            reader = Task { [task] in
                while !Task.isCancelled {
                    do {
                        switch try await task.receive() {
                        case .string(let text): continuation.yield(.text(text))
                        case .data: continue  // the protocol is text only; binary frames are ignored
                        @unknown default: continue
                        }
                    } catch {
                        break
                    }
                }
                // `closeCode` is `.invalid` (0) when the socket dropped without a close frame.
                let code = task.closeCode.rawValue
                continuation.yield(.closed(code: code == 0 ? nil : code))
                continuation.finish()
            }
            continuation.onTermination = { [task] _ in task.cancel(with: .goingAway, reason: nil) }
        }

        func send(_ text: String) async {
            try? await task.send(.string(text))
        }

        func close(code: Int) async {
            task.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: code) ?? .normalClosure, reason: nil)
        }

        deinit { reader.cancel() }
    }
#endif
