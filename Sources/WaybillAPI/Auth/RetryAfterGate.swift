import Foundation
import Synchronization

/// Remembers which client addresses were just told `503 Retry-After`, and refuses their logins
/// until then — for free: no store write, no password check.
///
/// Why: under a flood most logins are refused for overload anyway, but each one that reached the
/// store cost two writes (reserve, release) on the one writer that live events also need, and a
/// flood from many fresh addresses looks "clean" to the throttle. Real clients wait the second
/// they were told; flood tools do not. An address that comes back early is refused again, for
/// free, until the second it was told is over; then exactly one login goes through (`passOne`),
/// and the others keep waiting until that one is answered: refused for overload again, it sets a
/// new second; served, it opens the gate (`cleared`). So a pushing address costs the pool one
/// login a second while the pool is full. Its wait does not start over when it asks early: many
/// drivers behind one NAT who each wait their second still ask more than once a second together,
/// and were kept out for as long as anyone there asked (found by a review; and letting every
/// request in flight through when the second ended let a flood's whole concurrency in, found by
/// the next). Node-local on purpose: it only protects this node's CPU.
final class RetryAfterGate: Sendable {
    private let entries = Mutex<[String: Date]>([:])
    let seconds: Int
    private let capacity: Int

    init(seconds: Int = 1, capacity: Int = 10_000) {
        self.seconds = seconds
        self.capacity = capacity
    }

    /// Whether `address` must still wait (until the time it was told; asking again does not move it).
    func mustWait(_ address: String, now: Date) -> Bool {
        entries.withLock { entries in
            guard let until = entries[address], until > now else { return false }
            return true
        }
    }

    enum Pass: Equatable {
        /// No gate for the address.
        case free
        /// Its second is not over: refuse (503).
        case wait
        /// Its second is over and this caller is the one let through: the others wait for its
        /// answer (`refused` or `cleared`), or for another second if neither comes.
        case passed
    }

    func passOne(_ address: String, now: Date) -> Pass {
        entries.withLock { entries in
            guard let until = entries[address] else { return .free }
            if until > now { return .wait }
            entries[address] = now.addingTimeInterval(TimeInterval(seconds))
            return .passed
        }
    }

    /// The login let through (`.passed`) got past the pool: the gate opens. Only that one may open
    /// it: the logins a flood had in flight before its first 503 finish after it, and would.
    func cleared(_ address: String) {
        entries.withLock { entries in _ = entries.removeValue(forKey: address) }
    }

    /// `address` was just answered 503 with `Retry-After: seconds`.
    func refused(_ address: String, now: Date) {
        entries.withLock { entries in
            if entries.count >= capacity {
                entries = entries.filter { $0.value > now }  // bounded memory under a wide flood
                if entries.count >= capacity { entries.removeAll() }
            }
            entries[address] = now.addingTimeInterval(TimeInterval(seconds))
        }
    }
}
