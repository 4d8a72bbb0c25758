public import Foundation

/// Where an order is in its life cycle (SPEC §1).
public enum OrderStatus: String, Sendable, Codable, CaseIterable {
    case new
    case assigned
    case accepted
    case inProgress = "in_progress"
    case completed
    case cancelled
}

/// What happens at a stage of the route.
public enum StageKind: String, Sendable, Codable, CaseIterable {
    case pickup
    case delivery
    case stop
}

/// One stop on an order's route.
public struct Stage: Sendable, Equatable {
    /// `nil` until the store saves the stage.
    public var id: StageID?
    public var position: Int
    public var kind: StageKind
    public var address: String
    public var plannedAt: Date?
    public var completedAt: Date?

    public init(
        id: StageID? = nil, position: Int, kind: StageKind, address: String, plannedAt: Date? = nil,
        completedAt: Date? = nil
    ) {
        self.id = id
        self.position = position
        self.kind = kind
        self.address = address
        self.plannedAt = plannedAt
        self.completedAt = completedAt
    }
}

/// Metadata of a document attached to an order (the file itself lives elsewhere).
public struct Document: Sendable, Equatable {
    public var id: DocumentID?
    public var name: String
    public var kind: String
    public var createdAt: Date

    public init(id: DocumentID? = nil, name: String, kind: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.kind = kind
        self.createdAt = createdAt
    }
}

/// A job: the unit dispatchers create and drivers work on.
public struct Order: Sendable, Equatable {
    /// `nil` until the store inserts the order.
    public var id: OrderID?
    public var companyID: CompanyID
    /// Human number, unique per company: `YYYY/MM/NNNN`.
    public var number: String
    public var status: OrderStatus
    public var driverID: UserID?
    public var title: String
    public var notes: String
    public var stages: [Stage]
    public var documents: [Document]
    public var createdAt: Date
    public var updatedAt: Date
    /// +1 on every change; the order's ETag is derived from it.
    public var version: Int
    /// What the assigned driver's device last reported showing (`nil`: nothing yet, or no driver).
    /// Only `StoreWriter.recordSeen` changes it: saving an order never writes it, and recording
    /// it is not a change of the order (no new version).
    public var seen: OrderReceipt?

    public init(
        id: OrderID? = nil, companyID: CompanyID, number: String, status: OrderStatus = .new,
        driverID: UserID? = nil, title: String, notes: String = "", stages: [Stage] = [],
        documents: [Document] = [], createdAt: Date, updatedAt: Date, version: Int = 1, seen: OrderReceipt? = nil
    ) {
        self.id = id
        self.companyID = companyID
        self.number = number
        self.status = status
        self.driverID = driverID
        self.title = title
        self.notes = notes
        self.stages = stages
        self.documents = documents
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
        self.seen = seen
    }

    /// The summary row used in lists (no stages, no documents).
    public var summary: OrderSummary {
        OrderSummary(
            id: id ?? OrderID(0), number: number, status: status, driverID: driverID, title: title,
            createdAt: createdAt, updatedAt: updatedAt, version: version, seen: seen)
    }
}

/// A row of the order list: what `GET /api/orders/` returns per order.
public struct OrderSummary: Sendable, Equatable {
    public var id: OrderID
    public var number: String
    public var status: OrderStatus
    public var driverID: UserID?
    public var title: String
    public var createdAt: Date
    public var updatedAt: Date
    public var version: Int
    /// The assigned driver's receipt (see `Order.seen`).
    public var seen: OrderReceipt?

    public init(
        id: OrderID, number: String, status: OrderStatus, driverID: UserID?, title: String, createdAt: Date,
        updatedAt: Date, version: Int, seen: OrderReceipt? = nil
    ) {
        self.id = id
        self.number = number
        self.status = status
        self.driverID = driverID
        self.title = title
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.version = version
        self.seen = seen
    }
}
