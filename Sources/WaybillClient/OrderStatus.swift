/// An order's status as the server spells it (`new`, `assigned`, `accepted`, …).
///
/// A struct rather than an enum so that a status added on the server later decodes instead of failing.
public struct OrderStatus: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The wire spelling.
    public var rawValue: String
    /// A status with the given wire spelling.
    public init(rawValue: String) { self.rawValue = rawValue }
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public var description: String { rawValue }

    /// Created, no driver.
    public static let new = Self(rawValue: "new")
    /// A driver is assigned but has not accepted yet.
    public static let assigned = Self(rawValue: "assigned")
    /// The assigned driver accepted it.
    public static let accepted = Self(rawValue: "accepted")
    /// The driver is on the route.
    public static let inProgress = Self(rawValue: "in_progress")
    /// Done (final).
    public static let completed = Self(rawValue: "completed")
    /// Cancelled by a dispatcher (final).
    public static let cancelled = Self(rawValue: "cancelled")
}
