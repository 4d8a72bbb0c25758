import Dispatch
import Foundation
import Synchronization

/// Blocking work (a name lookup, a socket's whole request) on a thread of its own, with a bound on
/// how long its caller waits.
///
/// Why: `getaddrinfo` cannot be cancelled and has no timeout of its own; where no DNS server
/// answers, glibc tries each for 5 s, twice, so a client's "5 s" connect could wait 10–30 s
/// (found by a review, 2026-12-07). The caller now gets `timedOut()` at the bound, whatever the
/// work is doing; the thread ends when its work does, and its late result is dropped. The caller
/// is not woken sooner by cancelling its task: the bound is the request's own deadline.
enum OwnThread {
    static func run<T: Sendable>(
        within limit: Duration, stackSize: Int = 512 << 10, timedOut: @escaping @Sendable () -> any Error,
        _ work: @escaping @Sendable () throws -> T
    ) async throws -> T {
        let outcome = Once<T>()
        return try await withCheckedThrowingContinuation { continuation in
            outcome.set(continuation)
            let bound = Bound(DispatchWorkItem { outcome.resume(with: .failure(timedOut())) })
            let thread = Thread {
                let result = Result { try work() }
                bound.item.cancel()  // its timer would otherwise hold the closure until the bound
                outcome.resume(with: result)
            }
            thread.stackSize = stackSize
            thread.start()
            boundQueue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds(limit)), execute: bound.item)
        }
    }

    /// The bounds' timers. A queue of its own, not `DispatchQueue.global()`: on Linux Swift's
    /// tasks run on the global queues' threads, and with them busy a bound of 200 ms fired after
    /// 2.6 s (a stress run, 2026-12-07); a queue of its own gets a thread of its own.
    private static let boundQueue = DispatchQueue(label: "waybill.own-thread.bounds")

    /// `limit` in nanoseconds, 0 for a negative one and clamped for one past `Int`'s range.
    static func nanoseconds(_ limit: Duration) -> Int {
        let (seconds, attoseconds) = limit.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return Int.max }
        let (total, overflowAgain) = whole.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflowAgain ? Int.max : Int(clamping: max(0, total))
    }

    /// The bound's work item, shared with the work's thread, which cancels it: `cancel` may be
    /// called from any thread (Dispatch's documentation), which is all the thread does with it.
    private final class Bound: @unchecked Sendable {
        let item: DispatchWorkItem
        init(_ item: DispatchWorkItem) { self.item = item }
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
