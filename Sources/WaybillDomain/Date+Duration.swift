public import Foundation

extension Duration {
    /// The duration in seconds, for the few places that do `Date` arithmetic (stored times are
    /// `Date`s; lifetimes and windows are `Duration`s everywhere else).
    public var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds, rounded down (timeouts of C libraries: SQLite, libpq, `poll`).
    public var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

extension Date {
    /// This date moved by `duration` (backwards when it is negative).
    public func adding(_ duration: Duration) -> Date { addingTimeInterval(duration.timeInterval) }
}

extension Date {
    /// Milliseconds since 1970, to the nearest: what the stores keep and fingerprints hash.
    ///
    /// Never traps: a date from outside (a foreign broker message, a corrupt row) can be anything a
    /// `Double` holds, and `Int64(_:)` traps past ±2⁶³ or on NaN. Clamped to ±9·10¹⁵ ms (about
    /// 285 000 years either way), far beyond any date the server itself makes or accepts.
    public var epochMilliseconds: Int64 { Self.clampedMilliseconds((timeIntervalSince1970 * 1000).rounded()) }

    public static let millisecondsLimit: Int64 = 9_000_000_000_000_000

    private static func clampedMilliseconds(_ value: Double) -> Int64 {
        guard value.isFinite else { return 0 }
        let limit = Double(millisecondsLimit)
        return Int64(min(max(value, -limit), limit))
    }
}
