import Foundation
import Synchronization

/// Remembers which client addresses were just told `503 Retry-After`, and refuses their logins
/// until then — for free: no store write, no password check.
///
/// Why: under a flood most logins are refused for overload anyway, but each one that reached the
/// store cost two writes (reserve, release) on the one writer that live events also need, and a
/// flood from many fresh addresses looks "clean" to the throttle. Real clients wait the second
/// they were told; flood tools do not. An address that comes back early is refused again and its
/// wait starts over, so it stays out for as long as it keeps pushing, and the queue stays free
/// for everyone else — but only while password checks are waiting (`Authenticator.login` asks
/// the gate only then): on a pool with none, the overload is over and nobody is kept out.
/// Node-local on purpose: it only protects this node's CPU.
final class RetryAfterGate: Sendable {
    private let entries = Mutex<[String: Date]>([:])
    let seconds: Int
    private let capacity: Int

    init(seconds: Int = 1, capacity: Int = 10_000) {
        self.seconds = seconds
        self.capacity = capacity
    }

    /// Whether `address` must still wait; if so its wait starts over from `now` when `renewing`
    /// (the 503 gate: a client that does not wait stays out), else it ends when it was set to.
    func mustWait(_ address: String, now: Date, renewing: Bool = true) -> Bool {
        entries.withLock { entries in
            guard let until = entries[address], until > now else { return false }
            if renewing { entries[address] = now.addingTimeInterval(TimeInterval(seconds)) }
            return true
        }
    }

    /// `address` was just answered 503 with `Retry-After: seconds`.
    func refused(_ address: String, now: Date) {
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value > now }  // bounded memory under a wide flood
                // Still full: the half that ends soonest goes. Clearing them all let a flood of
                // 10 000 fresh addresses in a second free every address held back (found by a review).
                if entries.count >= capacity {
                    entries = Dictionary(
                        uniqueKeysWithValues: entries.sorted { $0.value > $1.value }.prefix(capacity / 2).map { ($0.key, $0.value) })
                }
            }
            entries[address] = now.addingTimeInterval(TimeInterval(seconds))
        }
    }
}
