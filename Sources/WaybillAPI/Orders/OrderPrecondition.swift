import WaybillDomain

/// What a write to an existing order expects that order to be: the parsed `If-Match` header
/// (SPEC §2, "Lost-update protection").
///
/// The check runs inside the store's write transaction, right after the order is read, so no
/// other write can slip in between the comparison and the save (on PostgreSQL the read locks the
/// row). It runs after the visibility check, so a missing or foreign order is still a 404 — a
/// 412 would tell a driver that another driver's order exists.
struct OrderPrecondition: Sendable, Equatable {
    /// The `If-Match` part.
    enum Version: Sendable, Equatable {
        /// No `If-Match`: the write applies to whatever version is current (writes still serialize).
        case none
        /// `If-Match: *`: any existing order.
        case anyExisting
        /// `If-Match: "o42-v7-h0b7e55d1", …`: the order's current ETag must be one of these (strong
        /// comparison of the version part: `"o42-v7-h0b7e55d1-s5"` matches version 7 of this history
        /// whatever its receipt is now; `"o42-v7"`, without the check, version 7 of any history).
        case oneOf([String])
    }

    var version = Version.none
    /// `If-Order-Created: <ms>`: the order must be the one created at that millisecond (its
    /// `created_at`). A restore brings the id counter back with the data, so the next order created
    /// can take the id of one a driver acted on while offline; a version alone cannot tell them
    /// apart when the client names none (docs/PROTOCOL.md).
    var createdAt: Int64?

    /// No precondition.
    static let none = Self()

    /// - Throws: `PreconditionFailed` when `order` is not what the client expected.
    func check(_ order: Order) throws(PreconditionFailed) {
        if let createdAt, createdAt != order.createdAt.epochMilliseconds {
            throw PreconditionFailed(currentETag: Conditional.etag(order), anotherOrder: true)
        }
        switch version {
        case .none, .anyExisting:
            return
        case .oneOf(let tags):
            // The version names what the client saw; a newer receipt is no conflict (Conditional.etag).
            // With its check, the version of this history only; without (built by a client from a
            // version), any content under that version number.
            let current = Conditional.versionTag(order), bare = Conditional.bareVersionTag(order)
            guard tags.map(Conditional.versionPart(of:)).contains(where: { $0 == current || $0 == bare }) else {
                throw PreconditionFailed(currentETag: Conditional.etag(order))
            }
        }
    }
}

/// A write's `If-Match` named an older version of the order: refused with 412, nothing changed.
struct PreconditionFailed: Error, Equatable, CustomStringConvertible {
    /// The order's ETag now, so the message can say what the client should reload.
    var currentETag: String
    /// `If-Order-Created` named another order: the id was given again after a restore.
    var anotherOrder = false

    var description: String {
        if anotherOrder {
            return "This is not the order you acted on: it was created at another time (the id was given to a new "
                + "order after the data was restored). Reload the order before acting on it."
        }
        return "The order was changed meanwhile (it is now \(currentETag)); reload it and try again."
    }
}
