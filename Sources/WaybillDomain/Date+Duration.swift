public import Foundation

extension Duration {
    /// The duration in seconds, for the few places that do `Date` arithmetic (stored times are
    /// `Date`s; lifetimes and windows are `Duration`s everywhere else).
    public var timeInterval: TimeInterval {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}

extension Date {
    /// This date moved by `duration` (backwards when it is negative).
    public func adding(_ duration: Duration) -> Date { addingTimeInterval(duration.timeInterval) }
}
