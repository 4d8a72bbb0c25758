import Synchronization

/// Carries one response from the responder's task to the service thread: the task posts a wake-up
/// and the loop picks the response up. Nothing waits on it (the service thread never blocks).
final class ResponseBox: Sendable {
    private let value = Mutex<HTTPResponse?>(nil)

    /// Any thread, once.
    func fulfil(_ response: HTTPResponse) {
        value.withLock { $0 = response }
    }

    /// The response if it has arrived.
    func take() -> HTTPResponse? { value.withLock { $0 } }

    /// Whether the response has arrived (without copying it).
    var isFilled: Bool { value.withLock { $0 != nil } }
}
