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
