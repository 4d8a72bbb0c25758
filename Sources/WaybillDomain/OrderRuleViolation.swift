/// Why a rule refused a change. The API maps each case to an HTTP status in one place.
public enum OrderRuleViolation: Error, Equatable, Sendable, CustomStringConvertible {
    /// The move is not in the transition table (SPEC §1): 409.
    case invalidTransition(from: OrderStatus, to: OrderStatus)
    /// The actor's role may not do this: 403.
    case roleNotAllowed(Role)
    /// A driver acting on an order that is not assigned to them (the API answers 404).
    case notAssignedDriver
    /// The stage does not belong to the order: 404.
    case stageNotFound(StageID)
    /// The stage was completed before: 409.
    case stageAlreadyCompleted(StageID)
    /// The order is finished (completed or cancelled) and cannot take this change: 409.
    case orderClosed(OrderStatus)
    /// The order holds `Order.maxDocuments` documents already: 409.
    case tooManyDocuments

    public var description: String {
        switch self {
        case .invalidTransition(let from, let to):
            "An order cannot move from \(from.rawValue) to \(to.rawValue)."
        case .roleNotAllowed(let role):
            "A \(role.rawValue) cannot do this."
        case .notAssignedDriver:
            "This order is not assigned to you."
        case .stageNotFound(let id):
            "The order has no stage \(id)."
        case .stageAlreadyCompleted(let id):
            "Stage \(id) is already completed."
        case .orderClosed(let status):
            "The order is \(status.rawValue) and cannot be changed this way."
        case .tooManyDocuments:
            "The order already has \(Order.maxDocuments) documents, the most it can hold."
        }
    }
}

/// Bad field values in a request body: 422.
public struct ValidationError: Error, Equatable, Sendable, CustomStringConvertible {
    public var field: String
    public var problem: String
    public init(field: String, problem: String) {
        self.field = field
        self.problem = problem
    }
    public var description: String { "\(field): \(problem)" }
}
