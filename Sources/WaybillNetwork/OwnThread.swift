import Dispatch
import Foundation
import Synchronization

/// Blocking work (a name lookup, a socket's whole request) on a thread of its own, with a bound on
/// how long its caller waits.
///
/// Why: `getaddrinfo` cannot be cancelled and has no timeout of its own; where no DNS server
/// answers, glibc tries each for 5 s, twice, so a client's "5 s" connect could wait 10–30 s, and
/// its `stop()` could not cut that short (found by a review, 2026-12-07). The caller now gets
/// `timedOut()` at the bound; the thread ends when its work does, and its late result is dropped.
enum OwnThread {
    static func run<T: Sendable>(
        within limit: Duration, stackSize: Int = 512 << 10, timedOut: @escaping @Sendable () -> any Error,
        _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let outcome = Once<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            let thread = Thread { outcome.resume(with: Result { try work() }) }
            thread.stackSize = stackSize
            thread.start()
            let nanoseconds = limit.components.seconds * 1_000_000_000 + limit.components.attoseconds / 1_000_000_000
            DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: max(0, nanoseconds)))) {
                outcome.resume(with: .failure(timedOut()))
            }
        }
    }

    /// A continuation resumed once: by the work or by the bound, whichever comes first.
    private final class Once<T: Sendable>: Sendable {
        private let continuation = Mutex<CheckedContinuation<T, any Error>?>(nil)

        func set(_ continuation: CheckedContinuation<T, any Error>) { self.continuation.withLock { $0 = continuation } }

        func resume(with result: Result<T, any Error>) {
            let taken = continuation.withLock { slot -> CheckedContinuation<T, any Error>? in
                defer { slot = nil }
                return slot
            }
            taken?.resume(with: result)
        }
    }
}
