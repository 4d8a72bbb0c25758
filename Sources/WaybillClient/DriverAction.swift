/// A change a driver makes to one of their orders: what the offline queue holds (SPEC §5 rule 8).
///
/// `Codable` as one flat JSON object, the same shape `waybill driver` reads from stdin and the queue file
/// stores: `{"action":"status","order":42,"status":"accepted"}`,
/// `{"action":"complete_stage","order":42,"stage":3}`,
/// `{"action":"document","order":42,"name":"POD.pdf","kind":"proof_of_delivery"}`.
public enum DriverAction: Hashable, Sendable, Codable, CustomStringConvertible {
    /// `POST /api/orders/{id}/status {"status"}`.
    case changeStatus(of: OrderID, to: OrderStatus)
    /// `POST /api/orders/{id}/stages/{sid}/complete`.
    case completeStage(StageID, of: OrderID)
    /// `POST /api/orders/{id}/documents {"name","kind"}`.
    case attachDocument(name: String, kind: String, to: OrderID)

    /// The order the action changes.
    public var orderID: OrderID {
        switch self {
        case .changeStatus(let id, _), .completeStage(_, let id), .attachDocument(_, _, let id): id
        }
    }

    /// `status accepted 42`, `complete_stage 3 of 42`, `document "POD.pdf" to 42`: for logs and status lines.
    public var description: String {
        switch self {
        case .changeStatus(let id, let status): "status \(status) of order \(id)"
        case .completeStage(let stage, let id): "complete stage \(stage) of order \(id)"
        case .attachDocument(let name, _, let id): "attach \"\(name)\" to order \(id)"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case action, order, status, stage, name, kind
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let order = try c.decode(OrderID.self, forKey: .order)
        switch try c.decode(String.self, forKey: .action) {
        case "status":
            self = .changeStatus(of: order, to: try c.decode(OrderStatus.self, forKey: .status))
        case "complete_stage":
            self = .completeStage(try c.decode(StageID.self, forKey: .stage), of: order)
        case "document":
            self = .attachDocument(
                name: try c.decode(String.self, forKey: .name), kind: try c.decode(String.self, forKey: .kind),
                to: order)
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .action, in: c,
                debugDescription: "unknown action '\(other)' (status, complete_stage, document)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(orderID, forKey: .order)
        switch self {
        case .changeStatus(_, let status):
            try c.encode("status", forKey: .action)
            try c.encode(status, forKey: .status)
        case .completeStage(let stage, _):
            try c.encode("complete_stage", forKey: .action)
            try c.encode(stage, forKey: .stage)
        case .attachDocument(let name, let kind, _):
            try c.encode("document", forKey: .action)
            try c.encode(name, forKey: .name)
            try c.encode(kind, forKey: .kind)
        }
    }
}
