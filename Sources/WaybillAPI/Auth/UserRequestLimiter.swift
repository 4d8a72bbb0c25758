import Foundation
import Synchronization
import WaybillDomain

/// How many API requests one user may make on this node: a token bucket per user, `burst` deep,
/// refilled at `perSecond`. Past it a request is answered 429 `rate_limited` with `Retry-After`
/// before its handler runs (`RequestContext.requireUser`), so it costs no store work.
///
/// Why: every other flood has a bound (logins, sockets, frames, pongs), but a logged-in user's
/// requests had none. One runaway script with a dispatcher's token — a bulk import without a
/// pause, an app stuck in a retry loop — could take the writer and the service thread that every
/// company shares (about 2 000 writes/s on two cores). A proxy's per-address limit cannot tell
/// such a user from the office NAT the rest of its company sits behind; the server knows the user.
///
/// Per node, like `maxSocketsPerUser`: behind a balancer with N nodes a user gets up to N times the
/// rate (docs/HARDENING.md). The budget is the user's, shared by all of their tabs and devices; the
/// defaults leave room for a dozen busy panel tabs on one login (about 10 requests a second each).
final class UserRequestLimiter: Sendable {
    struct Rate: Sendable, Equatable {
        var perSecond: Int
        var burst: Int
    }

    enum Decision: Equatable {
        case allowed
        /// Refused; a token is back after `retryAfter` whole seconds (at least 1).
        case limited(retryAfter: Int)
    }

    private struct Bucket {
        var tokens: Double
        var at: Date
    }

    let rate: Rate
    /// Users tracked at most. A bucket that has filled up again carries nothing and is dropped when
    /// the table is full; a user beyond the bound while every bucket is still draining goes
    /// untracked (allowed) rather than growing the table.
    private let maxTracked: Int
    private struct State {
        var buckets: [UserID: Bucket] = [:]
        /// When the full table was last swept: at most once a second, so users past the bound cost
        /// a look-up each, not a walk of the whole table each (found by a review).
        var lastSweep: Date?
    }
    private let state = Mutex(State())

    /// `nil` when `perSecond` is 0 (no limit).
    init?(_ rate: Rate, maxTracked: Int = 100_000) {
        guard rate.perSecond > 0 else { return nil }
        self.rate = Rate(perSecond: rate.perSecond, burst: max(1, rate.burst))
        self.maxTracked = maxTracked
    }

    /// Takes a token for one request of `user` at `now`, if there is one.
    func admit(_ user: UserID, now: Date) -> Decision {
        state.withLock { state in
            var bucket = state.buckets[user].map { refilled($0, now: now) } ?? Bucket(tokens: Double(rate.burst), at: now)
            guard bucket.tokens >= 1 else {
                state.buckets[user] = bucket
                let wait = (1 - bucket.tokens) / Double(rate.perSecond)
                return .limited(retryAfter: max(1, Int(wait.rounded(.up))))
            }
            bucket.tokens -= 1
            if state.buckets[user] == nil, state.buckets.count >= maxTracked {
                if state.lastSweep.map({ abs(now.timeIntervalSince($0)) >= 1 }) ?? true {
                    state.lastSweep = now
                    state.buckets = state.buckets.filter { refilled($0.value, now: now).tokens < Double(rate.burst) }
                }
                guard state.buckets.count < maxTracked else { return .allowed }
            }
            state.buckets[user] = bucket
            return .allowed
        }
    }

    /// Users with a bucket now (tests: the bound).
    var trackedCount: Int { state.withLock { $0.buckets.count } }

    private func refilled(_ bucket: Bucket, now: Date) -> Bucket {
        // A wall clock set back neither drains a bucket nor freezes it until the clock catches up:
        // time that ran backwards counts as none, and the bucket goes on from the new time.
        let elapsed = max(0, now.timeIntervalSince(bucket.at))
        return Bucket(tokens: min(Double(rate.burst), bucket.tokens + elapsed * Double(rate.perSecond)), at: now)
    }
}
