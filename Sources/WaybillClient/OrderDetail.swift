public import Foundation

/// A whole order (`GET /api/orders/{id}/`): the summary fields plus notes, route stages and documents.
public struct OrderDetail: Identifiable, Hashable, Sendable, Codable {
    /// The order's id.
    public var id: OrderID
    /// Human order number, unique per company.
    public var number: String
    /// Current status.
    public var status: OrderStatus
    /// The assigned driver's user id, if any.
    public var driverID: Int64?
    /// Short title.
    public var title: String
    /// Free text for the driver.
    public var notes: String
    /// Route stages, in `position` order.
    public var stages: [Stage]
    /// Attached document metadata.
    public var documents: [Document]
    /// When the order was created.
    public var createdAt: Date?
    /// When the order last changed.
    public var updatedAt: Date?
    /// +1 on every change.
    public var version: Int64

    /// An order with the given fields (mostly for previews and tests).
    public init(
        id: OrderID,
        number: String,
        status: OrderStatus,
        driverID: Int64? = nil,
        title: String,
        notes: String = "",
        stages: [Stage] = [],
        documents: [Document] = [],
        createdAt: Date? = nil,
        updatedAt: Date? = nil,
        version: Int64 = 1
    ) {
        self.id = id
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
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(OrderID.self, forKey: .id)
        number = try c.decode(String.self, forKey: .number)
        status = try c.decode(OrderStatus.self, forKey: .status)
        driverID = try c.decodeIfPresent(Int64.self, forKey: .driverID)
        title = try c.decodeIfPresent(String.self, forKey: .title) ?? ""
        notes = try c.decodeIfPresent(String.self, forKey: .notes) ?? ""  // `null` and absent read as empty
        stages = try c.decodeIfPresent([Stage].self, forKey: .stages) ?? []
        documents = try c.decodeIfPresent([Document].self, forKey: .documents) ?? []
        createdAt = try c.decodeIfPresent(Date.self, forKey: .createdAt)
        updatedAt = try c.decodeIfPresent(Date.self, forKey: .updatedAt)
        version = try c.decode(Int64.self, forKey: .version)
    }

    enum CodingKeys: String, CodingKey {
        case id, number, status, title, notes, stages, documents, version
        case driverID = "driver_id"
        case createdAt = "created_at"
        case updatedAt = "updated_at"
    }

    /// A route stage: where the driver picks up, delivers or stops.
    public struct Stage: Identifiable, Hashable, Sendable, Codable {
        /// The stage's id.
        public var id: StageID
        /// Order along the route, from 1.
        public var position: Int
        /// `pickup`, `delivery` or `stop`.
        public var kind: String
        /// Where.
        public var address: String
        /// When it is planned, if planned.
        public var plannedAt: Date?
        /// When the driver completed it; `nil` while open.
        public var completedAt: Date?

        /// A stage with the given fields.
        public init(
            id: StageID,
            position: Int,
            kind: String,
            address: String,
            plannedAt: Date? = nil,
            completedAt: Date? = nil
        ) {
            self.id = id
            self.position = position
            self.kind = kind
            self.address = address
            self.plannedAt = plannedAt
            self.completedAt = completedAt
        }

        /// Whether the driver has completed this stage.
        public var isCompleted: Bool { completedAt != nil }

        enum CodingKeys: String, CodingKey {
            case id, position, kind, address
            case plannedAt = "planned_at"
            case completedAt = "completed_at"
        }
    }

    /// Metadata of a document attached to an order.
    public struct Document: Identifiable, Hashable, Sendable, Codable {
        /// The document's id.
        public var id: Int64
        /// File or display name.
        public var name: String
        /// Free-form kind (e.g. `cmr`, `photo`).
        public var kind: String
        /// When it was attached.
        public var createdAt: Date?

        /// A document with the given fields.
        public init(id: Int64, name: String, kind: String, createdAt: Date? = nil) {
            self.id = id
            self.name = name
            self.kind = kind
            self.createdAt = createdAt
        }

        enum CodingKeys: String, CodingKey {
            case id, name, kind
            case createdAt = "created_at"
        }
    }
}
