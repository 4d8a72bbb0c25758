import Foundation
import WaybillDomain

/// A row of `GET /api/orders/`.
struct OrderSummaryJSON: Encodable {
    let summary: OrderSummary

    enum CodingKeys: String, CodingKey {
        case id, number, status, title, version, seen
        case driverID = "driver_id", createdAt = "created_at", updatedAt = "updated_at"
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(summary.id, forKey: .id)
        try c.encode(summary.number, forKey: .number)
        try c.encode(summary.status, forKey: .status)
        try c.encode(summary.driverID, forKey: .driverID)  // explicit null when unassigned
        try c.encode(summary.title, forKey: .title)
        try c.encode(summary.createdAt, forKey: .createdAt)
        try c.encode(summary.updatedAt, forKey: .updatedAt)
        try c.encode(summary.version, forKey: .version)
        try c.encode(summary.seen.map(ReceiptJSON.init), forKey: .seen)  // explicit null: nothing seen yet
    }
}

/// `seen` of an order (SPEC §2, "Receipts"): `{"driver_id":7,"version":5,"at":"…Z"}`.
struct ReceiptJSON: Encodable {
    let receipt: OrderReceipt
    enum CodingKeys: String, CodingKey { case version, at, driverID = "driver_id" }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(receipt.driverID, forKey: .driverID)
        try c.encode(receipt.version, forKey: .version)
        try c.encode(receipt.at, forKey: .at)
    }
}

/// The full order of `GET /api/orders/{id}/` and of every write's answer.
struct OrderDetailJSON: Encodable {
    let order: Order

    enum CodingKeys: String, CodingKey { case notes, stages, documents }

    func encode(to encoder: any Encoder) throws {
        try OrderSummaryJSON(summary: order.summary).encode(to: encoder)
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(order.notes, forKey: .notes)
        try c.encode(order.stages.map(StageJSON.init), forKey: .stages)
        try c.encode(order.documents.map(DocumentJSON.init), forKey: .documents)
    }
}

struct StageJSON: Encodable {
    let stage: Stage
    enum CodingKeys: String, CodingKey {
        case id, position, kind, address
        case plannedAt = "planned_at", completedAt = "completed_at"
    }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(stage.id, forKey: .id)
        try c.encode(stage.position, forKey: .position)
        try c.encode(stage.kind, forKey: .kind)
        try c.encode(stage.address, forKey: .address)
        try c.encode(stage.plannedAt, forKey: .plannedAt)
        try c.encode(stage.completedAt, forKey: .completedAt)
    }
}

struct DocumentJSON: Encodable {
    let document: Document
    enum CodingKeys: String, CodingKey { case id, name, kind, createdAt = "created_at" }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(document.id, forKey: .id)
        try c.encode(document.name, forKey: .name)
        try c.encode(document.kind, forKey: .kind)
        try c.encode(document.createdAt, forKey: .createdAt)
    }
}

/// A user as `GET /api/me`, login and `GET /api/drivers/` show them (never the password hash).
struct UserJSON: Encodable {
    let user: User
    enum CodingKeys: String, CodingKey { case id, email, name, role, companyID = "company_id" }
    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(user.id, forKey: .id)
        try c.encode(user.email, forKey: .email)
        try c.encode(user.name, forKey: .name)
        try c.encode(user.role, forKey: .role)
        try c.encode(user.companyID, forKey: .companyID)
    }
}
