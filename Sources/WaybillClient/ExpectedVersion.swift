/// Which version of an order a driver's action is meant for: what the session sends as `If-Match`.
///
/// A driver acts on what the screen shows: "accept" on an order whose address the dispatcher has just
/// changed should not go through unseen. So by default (``shownDetail``) an action carries the version of
/// the detail the app opened through the session; if the order changed since, the server refuses it (412),
/// the session reloads the order, and the action throws ``WaybillClientError/conflict``.
///
/// ```swift
/// try await session.changeStatus(of: id, to: .accepted)                        // the opened detail's version
/// try await session.changeStatus(of: id, to: .accepted, expecting: .version(row.version))  // from a list row
/// try await session.changeStatus(of: id, to: .accepted, expecting: .any)       // no precondition
/// ```
public struct ExpectedVersion: Hashable, Sendable {
    enum Kind: Hashable, Sendable {
        case shownDetail
        case any
        case version(Int64)
        case etag(String)
    }

    let kind: Kind

    /// The version of the detail the session holds for this order (opened with ``DriverSession/detail(_:)``);
    /// no precondition when the order is not opened. The default.
    public static let shownDetail = Self(kind: .shownDetail)
    /// No precondition: the action applies to whatever version is current.
    public static let any = Self(kind: .any)
    /// Exactly this `version` of the order (e.g. from an ``OrderSummary`` row).
    public static func version(_ version: Int64) -> Self { Self(kind: .version(version)) }
    /// Exactly the version this `ETag` names (as a fetch or an earlier write returned it).
    public static func etag(_ etag: String) -> Self { Self(kind: .etag(etag)) }

    /// The `If-Match` value for order `id`, given the ETag and version of the detail the session has
    /// cached.
    ///
    /// An order's ETag is `"o<id>-v<version>-h<check>"` (SPEC §2, and the version's check in the
    /// server's history: docs/PROTOCOL.md), and the server matches `"o<id>-v<version>"` by version
    /// alone, so a version is enough to name it, though not its history: the server's own tag is
    /// used whenever the session has it. A detail kept without its tag (a proxy stripped it) is
    /// still what the screen shows: its version names it.
    static func etag(of id: OrderID, version: Int64) -> String { "\"o\(id.rawValue)-v\(version)\"" }

    func ifMatch(for id: OrderID, cachedETag: String?, cachedVersion: Int64?) -> String? {
        switch kind {
        case .shownDetail: cachedETag ?? cachedVersion.map { Self.etag(of: id, version: $0) }
        case .any: nil
        case .version(let version): Self.etag(of: id, version: version)
        case .etag(let etag): etag
        }
    }
}
