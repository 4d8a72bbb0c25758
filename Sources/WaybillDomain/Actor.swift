/// Who is acting: the authenticated user as the rules see it.
public struct Actor: Sendable, Equatable {
    public var userID: UserID
    public var companyID: CompanyID
    public var role: Role

    public init(userID: UserID, companyID: CompanyID, role: Role) {
        self.userID = userID
        self.companyID = companyID
        self.role = role
    }

    public var isDispatcher: Bool { role == .dispatcher }

    /// Whether this actor may see `order` at all. Anything else is "not found" to them, never "forbidden".
    public func canSee(_ order: Order) -> Bool {
        guard order.companyID == companyID else { return false }
        return isDispatcher || order.driverID == userID
    }
}
