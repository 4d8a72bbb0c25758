import WaybillDomain

/// What a write to an existing order expects that order to be: the parsed `If-Match` header
/// (SPEC §2, "Lost-update protection").
///
/// The check runs inside the store's write transaction, right after the order is read, so no
/// other write can slip in between the comparison and the save (on PostgreSQL the read locks the
/// row). It runs after the visibility check, so a missing or foreign order is still a 404 — a
/// 412 would tell a driver that another driver's order exists.
enum OrderPrecondition: Sendable, Equatable {
    /// No `If-Match`: the write applies to whatever version is current (writes still serialize).
    case none
    /// `If-Match: *`: any existing order.
    case anyExisting
    /// `If-Match: "o42-v7-h0b7e55d1", …`: the order's current ETag must be one of these (strong
    /// comparison of the version part: `"o42-v7-h0b7e55d1-s5"` matches version 7 of this history
    /// whatever its receipt is now; `"o42-v7"`, without the check, version 7 of any history).
    /// Two tags a client builds name the order by when it was created (`Conditional.identityTags`):
    /// `"o42-c<ms>"` matches any version of that order, `"o42-v7-c<ms>"` its version 7; neither
    /// matches an order that took id 42 after a restore.
    case oneOf([String])

    /// - Throws: `PreconditionFailed` when `order` is not what the client expected.
    func check(_ order: Order) throws(PreconditionFailed) {
        switch self {
        case .none, .anyExisting:
            return
        case .oneOf(let tags):
            // The version names what the client saw; a newer receipt is no conflict (Conditional.etag).
            // With its check, the version of this history only; without (built by a client from a
            // version), any content under that version number.
            let current = Conditional.versionTag(order), bare = Conditional.bareVersionTag(order)
            let identity = Conditional.identityTags(order)
            let matching = [current, bare, identity.any, identity.version]
            guard tags.map(Conditional.versionPart(of:)).contains(where: matching.contains) else {
                let namedIdentity = tags.contains { $0.contains("-c") }
                throw PreconditionFailed(currentETag: Conditional.etag(order), namedIdentity: namedIdentity)
            }
        }
    }
}

/// A write's `If-Match` named an older version of the order: refused with 412, nothing changed.
struct PreconditionFailed: Error, Equatable, CustomStringConvertible {
    /// The order's ETag now, so the message can say what the client should reload.
    var currentETag: String
    /// The client named the order by when it was created (`Conditional.identityTags`): the order
    /// under this id may be another one.
    var namedIdentity = false

    var description: String {
        if namedIdentity {
            return "The order is not the one you acted on, or was changed meanwhile (it is now \(currentETag)): "
                + "the id may have been given to another order after a restore. Reload it before acting again."
        }
        return "The order was changed meanwhile (it is now \(currentETag)); reload it and try again."
    }
}
