import WaybillText

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
    /// are named several times on its way out). Written as bytes on the stack (`writeName`) and
    /// made a string once, not joined from the prefix and the number's own string (1.5 µs per
    /// write that way; docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)): up to 15 bytes (every real
    /// name) the result is a small string, kept inline without an allocation.
    public var name: String {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Self.longestName) { out in
            String(decoding: UnsafeBufferPointer(rebasing: out[0..<writeName(into: out, at: 0)]), as: UTF8.self)
        }
    }

    /// The most bytes a name takes: `company_` and a 64-bit number with its sign.
    package static let longestName = 8 + ASCIIText.longestDecimal

    /// Writes `name`'s bytes into `out` from `offset` and returns the offset after them; `out` must
    /// have room for `longestName` bytes there (checked: the writes below are not).
    package func writeName(into out: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        precondition(offset >= 0 && out.count - offset >= Self.longestName, "no room for a group's name")
        let prefix: StaticString, raw: Int64
        switch self {
        case .company(let id): (prefix, raw) = ("company_", id.rawValue)
        case .fleet(let id): (prefix, raw) = ("fleet_", id.rawValue)
        case .driver(let id): (prefix, raw) = ("driver_", id.rawValue)
        }
        var at = offset
        prefix.withUTF8Buffer { bytes in
            for byte in bytes {
                out[at] = byte
                at += 1
            }
        }
        return ASCIIText.writeDecimal(raw, into: out, at: at)
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
