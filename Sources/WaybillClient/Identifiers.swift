/// What the client's typed ids share: an integer from the server, encoded as a bare number.
///
/// One protocol with default implementations, so each id below is a two-line struct and an
/// `OrderID` can never be passed where a `StageID` is expected.
public protocol WireIdentifier: RawRepresentable, Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral where RawValue == Int64
{
    init(rawValue: Int64)
}

extension WireIdentifier {
    /// Wraps the server's integer id.
    public init(_ rawValue: Int64) { self.init(rawValue: rawValue) }
    public init(integerLiteral value: Int64) { self.init(rawValue: value) }
    public init(from decoder: any Decoder) throws { self.init(rawValue: try decoder.singleValueContainer().decode(Int64.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { String(rawValue) }
}

/// The identifier of an order (`id` / `order_id` on the wire).
public struct OrderID: WireIdentifier {
    /// The server's integer id.
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
}

/// The identifier of a route stage of an order.
public struct StageID: WireIdentifier {
    /// The server's integer id.
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
}

/// The position of an event in the server's outbox: strictly increasing, the resume cursor (`since`).
public struct EventID: WireIdentifier {
    /// The server's integer id.
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
}

/// Where a client resumes the event stream: the `cursor` of the last frame seen (SPEC §4).
///
/// `"<event_id>-<check>"`, where the check is a fingerprint of that stored event. Resuming with it
/// (`?cursor=`) lets the server notice that its history was rewound (a restored backup, a failover)
/// and answer `reset` instead of a replay that skips events. Opaque to the client: it is only sent back.
public struct ResumeCursor: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The wire text, e.g. `1234-0b7e55d1`.
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Wraps the `cursor` of a frame.
    public init(_ rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }
}
