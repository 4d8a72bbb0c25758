import struct Foundation.Date

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
/// try await session.changeStatus(of: id, to: .accepted, expecting: .any)       // any version of it
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
    /// when the order is not opened, any version of it (named by its `created_at` from the list, see
    /// ``any``). The default.
    public static let shownDetail = Self(kind: .shownDetail)
    /// Whatever version is current. Still the order the session knows under this id, when it has the
    /// order's `created_at` (a list row or an opened detail): after a restore the id can be given to
    /// another order, and the server refuses the action for it (412).
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

    /// Tags that name the order by when it was created (docs/PROTOCOL.md, "Writing without losing
    /// someone else's change"): `"o42-c<ms>"` matches any version of that order, `"o42-v7-c<ms>"` its
    /// version 7. A restore brings the id counter back with the data, so the next order created can
    /// take the id of one the driver acted on while offline; neither tag matches that order. The
    /// server's own tag needs neither: its check already names the version in its history.
    static func identityTag(of id: OrderID, version: Int64? = nil, createdAt: Date) -> String {
        let millis = Int64((createdAt.timeIntervalSince1970 * 1000).rounded())
        return "\"o\(id.rawValue)" + (version.map { "-v\($0)" } ?? "") + "-c\(millis)\""
    }

    /// The `If-Match` for order `id`, given what the session holds of it: the cached detail's ETag and
    /// version, and the order's `created_at` (from the detail or a list row). `nil`: no precondition
    /// (nothing is known of the order).
    func ifMatch(for id: OrderID, cachedETag: String?, cachedVersion: Int64?, createdAt: Date? = nil) -> String? {
        func named(_ version: Int64?) -> String? {
            if let createdAt { return Self.identityTag(of: id, version: version, createdAt: createdAt) }
            return version.map { Self.etag(of: id, version: $0) }
        }
        switch kind {
        case .shownDetail: return cachedETag ?? named(cachedVersion)
        case .any: return named(nil)
        case .version(let version): return named(version)
        case .etag(let etag): return etag
        }
    }
}
