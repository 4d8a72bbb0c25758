/// What a user may do: dispatchers manage orders, drivers work on their own.
public enum Role: String, Sendable, Codable, CaseIterable {
    case dispatcher
    case driver
}

/// A tenant. Nothing of one company is ever visible to another.
public struct Company: Sendable, Equatable, Codable {
    public var id: CompanyID
    public var name: String
    public init(id: CompanyID, name: String) {
        self.id = id
        self.name = name
    }
}

/// A person who logs in. A driver user *is* the driver (`driver_id` = user id).
public struct User: Sendable, Equatable, Codable {
    public var id: UserID
    /// `nil` for a user who belongs to no company (such a user may log in but do nothing).
    public var companyID: CompanyID?
    public var role: Role
    public var email: String
    public var name: String

    public init(id: UserID, companyID: CompanyID?, role: Role, email: String, name: String) {
        self.id = id
        self.companyID = companyID
        self.role = role
        self.email = email
        self.name = name
    }

    public var isDispatcher: Bool { role == .dispatcher }
}
