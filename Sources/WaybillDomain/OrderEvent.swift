public import Foundation

/// The kinds of order event (SPEC §3).
public enum OrderEventType: String, Sendable, Codable, CaseIterable {
    case created = "order_created"
    case updated = "order_updated"
    case statusChanged = "order_status_changed"
    case assigned = "order_assigned"
    case unassigned = "order_unassigned"
    case deleted = "order_deleted"
    /// The assigned driver's device reported showing a version (SPEC §3): to `company_` and
    /// `fleet_` only, never to a driver group. Not a change of the order: no new version.
    case seen = "order_seen"
}

/// One event as the broadcaster decides it, before the outbox gives it an id.
public struct OrderEvent: Sendable, Equatable {
    public var type: OrderEventType
    public var companyID: CompanyID
    public var orderID: OrderID
    public var number: String
    public var oldStatus: OrderStatus?
    public var newStatus: OrderStatus
    public var driverID: UserID?
    /// The driver the order was taken from, on assignment changes.
    public var oldDriverID: UserID?
    public var changedAt: Date
    /// Who receives it. Never empty.
    public var groups: [Group]
    /// `order_seen` only: the order version the driver's device reported showing (`changedAt`
    /// is when it was recorded, `driverID` the driver).
    public var seenVersion: Int?

    public init(
        type: OrderEventType, companyID: CompanyID, orderID: OrderID, number: String, oldStatus: OrderStatus?,
        newStatus: OrderStatus, driverID: UserID?, oldDriverID: UserID? = nil, changedAt: Date, groups: [Group],
        seenVersion: Int? = nil
    ) {
        self.type = type
        self.companyID = companyID
        self.orderID = orderID
        self.number = number
        self.oldStatus = oldStatus
        self.newStatus = newStatus
        self.driverID = driverID
        self.oldDriverID = oldDriverID
        self.changedAt = changedAt
        self.groups = groups
        self.seenVersion = seenVersion
    }
}

/// An event committed to the outbox: its id is the resume cursor every node agrees on.
public struct StoredEvent: Sendable, Equatable {
    public var id: EventID
    public var event: OrderEvent
    /// When its transaction committed, at millisecond precision (every store round-trips
    /// milliseconds exactly: the cursor's fingerprint is computed from them).
    public var committedAt: Date

    public init(id: EventID, event: OrderEvent, committedAt: Date = Date(timeIntervalSince1970: 0)) {
        self.id = id
        self.event = event
        self.committedAt = committedAt
    }

    /// The resume cursor of this event: its id plus a fingerprint of what was stored under it.
    public var cursor: EventCursor { EventCursor(of: self) }
}
