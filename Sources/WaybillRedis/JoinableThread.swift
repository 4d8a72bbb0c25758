#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A POSIX thread running one closure, which its owner can `join`.
///
/// Redis's blocking C calls run here, never on Swift's cooperative pool (two threads on this
/// machine, needed by request handlers). Foundation's `Thread` cannot be joined, and `close()`
/// must know that the thread has let go of its hiredis context before returning.
final class JoinableThread: Sendable {
    private let handle: pthread_t

    /// Starts `body` on a new thread.
    /// - Throws: `BrokerError`-free `JoinableThreadError` when the system refuses a thread.
    init(_ body: @escaping @Sendable () -> Void) throws(JoinableThreadError) {
        let box = Unmanaged.passRetained(Box(body))
        var handle = pthread_t()
        let status = pthread_create(
            &handle, nil,
            { raw in
                let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
                box.body()
                return nil
            }, box.toOpaque())
        guard status == 0 else {
            box.release()
            throw JoinableThreadError(code: status)
        }
        self.handle = handle
    }

    /// Waits until the closure has returned. Call it once, never from the thread itself.
    func join() {
        _ = pthread_join(handle, nil)
    }

    /// Whether the caller is this thread (joining itself would deadlock).
    var isCurrent: Bool { pthread_equal(pthread_self(), handle) != 0 }

    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
}

/// `pthread_create` failed.
struct JoinableThreadError: Error {
    var code: Int32
}
