public import Foundation

/// The wall clock for timestamps, injected so tests can fix time.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// A wall clock that follows real time, as the system's does (a test's may be set off by a step):
/// durations beside it are measured on `ElapsedClock`.
public protocol RealTimeWallClock: WallClock {}

/// The real clock.
public struct SystemWallClock: RealTimeWallClock {
    public init() {}
    public func now() -> Date { Date() }
}

/// Time for durations kept in this process (the token cache, the login gates, each user's request
/// bucket), shaped like the wall clock but never stepped: measured with the wall clock, a clock set
/// back by an hour kept a cached token (and a 429 gate) an hour longer, and one set forward
/// refilled every user's request bucket at once (found by a review, 2026-12-05). Its dates mean
/// nothing outside this process: they are never stored or sent.
public struct ElapsedClock: WallClock {
    private static let origin = ContinuousClock.now
    public init() {}
    public func now() -> Date {
        let (seconds, attoseconds) = Self.origin.duration(to: .now).components  // read once: every request asks
        return Date(timeIntervalSinceReferenceDate: Double(seconds) + Double(attoseconds) / 1e18)
    }

    /// The clock for durations beside `wall`: this one beside a clock of real time; a clock a test
    /// moves by hand drives both, so the test moves every time it checks.
    public static func beside(_ wall: any WallClock) -> any WallClock { wall is any RealTimeWallClock ? ElapsedClock() : wall }
}
