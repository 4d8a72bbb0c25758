/// A delivery group: who receives an event (SPEC §3).
public enum Group: Hashable, Sendable, CustomStringConvertible {
    /// The dispatchers' web panel of a company.
    case company(CompanyID)
    /// The fleet map of a company.
    case fleet(CompanyID)
    /// One driver's own group: only events of orders assigned to that driver.
    case driver(UserID)

    /// The wire name: `company_1`, `fleet_1`, `driver_7`.
    ///
    /// Put together from the raw number, not by interpolating the id: interpolation went through
    /// the id's `description` as an existential, about 0.6 % of a write's CPU (an event's groups
    /// are named several times on its way out). Up to 15 bytes the result is a small string,
    /// kept inline without an allocation.
    public var name: String {
        switch self {
        case .company(let id): "company_" + String(id.rawValue)
        case .fleet(let id): "fleet_" + String(id.rawValue)
        case .driver(let id): "driver_" + String(id.rawValue)
        }
    }

    public var description: String { name }

    /// The kind without the id, safe as a metric label: `company`, `fleet`, `driver`.
    public var kind: String {
        switch self {
        case .company: "company"
        case .fleet: "fleet"
        case .driver: "driver"
        }
    }

    /// Parses a wire name; `nil` for anything else.
    public init?(name: String) {
        guard let underscore = name.lastIndex(of: "_"),
            let raw = Int64(name[name.index(after: underscore)...]), raw > 0
        else { return nil }
        switch name[..<underscore] {
        case "company": self = .company(CompanyID(raw))
        case "fleet": self = .fleet(CompanyID(raw))
        case "driver": self = .driver(UserID(raw))
        default: return nil
        }
    }
}
