public import Foundation

/// One row of the order list (`GET /api/orders/`): an order without its stages and documents.
public struct OrderSummary: Identifiable, Hashable, Sendable, Codable {
    /// The order's id.
    public var id: OrderID
    /// Human order number, unique per company (e.g. `2026/11/0042`).
    public var number: String
    /// Current status.
    public var status: OrderStatus
    /// The assigned driver's user id, if any.
    public var driverID: Int64?
    /// Short title.
    public var title: String
    /// When the order was created.
    public var createdAt: Date?
    /// When the order last changed.
    public var updatedAt: Date?
    /// +1 on every change; lets the client notice a stale cached detail.
    public var version: Int64

    /// A row with the given fields (mostly for previews and tests).
    public init(
        id: OrderID,
        number: String,
        status: OrderStatus,
        driverID: Int64? = nil,
        title: String,
        createdAt: Date? = nil,
        updatedAt: Date? = nil,
        version: Int64 = 1
    ) {
        self.id = id
        self.number = number
        self.status = status
        self.driverID = driverID
        self.title = title
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
    }

    enum CodingKeys: String, CodingKey {
        case id, number, status, title, version
        case driverID = "driver_id"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }
}
