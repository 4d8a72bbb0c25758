import Foundation
import Synchronization

/// Carries one response from the responder's task to the service thread.
///
/// Normally the task posts a wake-up and the loop picks the response up; in the one case where
/// lws must get its answer inside a callback (see `ServerCore.httpBodyCompleted`), the service
/// thread waits for it here instead.
final class ResponseBox: Sendable {
    private let value = Mutex<HTTPResponse?>(nil)
    private let ready = DispatchSemaphore(value: 0)

    /// Any thread, once.
    func fulfil(_ response: HTTPResponse) {
        value.withLock { $0 = response }
        ready.signal()
    }

    /// The response if it has arrived.
    func take() -> HTTPResponse? { value.withLock { $0 } }

    /// Whether the response has arrived (without copying it).
    var isFilled: Bool { value.withLock { $0 != nil } }

    /// Blocks until the response arrives or `timeout` passes.
    func wait(timeout: Duration) -> HTTPResponse? {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
        _ = ready.wait(timeout: .now() + seconds)
        return take()
    }
}
