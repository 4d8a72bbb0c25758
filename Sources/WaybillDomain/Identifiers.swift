/// Typed identifiers: an `OrderID` can never be passed where a `UserID` is expected.
public protocol Identifier: Hashable, Comparable, Sendable, Codable, CustomStringConvertible,
    ExpressibleByIntegerLiteral
{
    var rawValue: Int64 { get }
    init(_ rawValue: Int64)
}

extension Identifier {
    public init(integerLiteral value: Int64) { self.init(value) }
    public var description: String { String(rawValue) }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
    public init(from decoder: any Decoder) throws { self.init(try decoder.singleValueContainer().decode(Int64.self)) }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A company (tenant).
public struct CompanyID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

/// A user; for a driver this is also the driver id.
public struct UserID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

/// An order (a job).
public struct OrderID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

/// A route stage of an order.
public struct StageID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

/// A document attached to an order.
public struct DocumentID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
}

/// The position of an event in the outbox: strictly increasing in commit order, the resume cursor.
public struct EventID: Identifier {
    public let rawValue: Int64
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    /// "Before any event": a client that has seen nothing.
    public static let zero = EventID(0)
}
