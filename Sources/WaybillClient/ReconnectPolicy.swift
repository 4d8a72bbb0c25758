/// How the session retries a dropped WebSocket: exponential backoff, optional full jitter, optional attempt limit.
///
/// Attempt `n` (0-based, counted since a socket last stayed live for `stableAfter`) waits `min(cap, base · 2ⁿ)`; with
/// ``Jitter-swift.enum/full`` it waits a uniformly random time in `[0, min(cap, base · 2ⁿ)]` instead, so a fleet
/// of phones dropped by one server restart does not reconnect in lockstep. After `maxAttempts` failures the
/// session stops reconnecting and relies on polling (``ConnectionState/pollingOnly``) until the app wakes it.
public struct ReconnectPolicy: Hashable, Sendable {
    /// How a delay is randomised.
    public enum Jitter: Hashable, Sendable {
        /// Exactly the exponential delay.
        case none
        /// Uniform in `[0, exponential delay]` ("full jitter").
        case full
    }

    /// The first delay (before jitter).
    public var base: Duration
    /// No delay is longer than this.
    public var cap: Duration
    /// Reconnect attempts before falling back to polling only; `nil` means never give up.
    public var maxAttempts: Int?
    /// How delays are randomised.
    public var jitter: Jitter
    /// How long a socket must stay live before the attempt count starts again from 0. A server at
    /// capacity answers `connected` and then closes (1013 "try again later"); counting from 0 at
    /// every `connected` would bring the whole fleet back at the first delay, again and again.
    public var stableAfter: Duration

    /// A policy with the given fields; the defaults are ``standard``.
    public init(
        base: Duration = .seconds(1),
        cap: Duration = .seconds(60),
        maxAttempts: Int? = nil,
        jitter: Jitter = .full,
        stableAfter: Duration = .seconds(10)
    ) {
        self.base = base
        self.cap = cap
        self.maxAttempts = maxAttempts
        self.jitter = jitter
        self.stableAfter = stableAfter
    }

    /// Base 1 s, cap 60 s, full jitter, unlimited attempts.
    public static let standard = ReconnectPolicy()

    /// The mobile app's original behaviour: 3 tries after exactly 1, 2 and 4 s, then polling only.
    public static let classic = ReconnectPolicy(base: .seconds(1), cap: .seconds(4), maxAttempts: 3, jitter: .none)

    /// The delay before reconnect attempt `attempt` (0-based), or `nil` when the policy has given up.
    ///
    /// - Parameter random: the source of jitter; inject a seeded generator in tests.
    public func delay(forAttempt attempt: Int, random: inout some RandomNumberGenerator) -> Duration? {
        if let maxAttempts, attempt >= maxAttempts { return nil }
        let ceiling = exponentialDelay(forAttempt: attempt)
        switch jitter {
        case .none:
            return ceiling
        case .full:
            let nanos = ceiling.nanoseconds
            guard nanos > 0 else { return .zero }
            return .nanoseconds(Int64.random(in: 0...nanos, using: &random))
        }
    }

    /// `min(cap, base · 2ⁿ)`, computed without overflow for any `attempt`.
    func exponentialDelay(forAttempt attempt: Int) -> Duration {
        var delay = base
        for _ in 0..<max(0, attempt) {
            if delay >= cap { break }  // stops doubling long before it could overflow
            delay *= 2
        }
        return min(delay, cap)
    }
}

extension Duration {
    /// Whole nanoseconds, saturating at `Int64.max`.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled + attoseconds / 1_000_000_000
    }
}
