public import Foundation
import Synchronization

/// The kind of an order event (SPEC §3): one of this release's (`allCases`), or a kind a newer
/// release added, read back from the store or the broker by a node that does not know it yet.
///
/// Why not an enum: in a rolling upgrade, the first node of a release that adds a kind commits
/// such events while the others still run the release before. With an enum those nodes could
/// not read them: each node's feed read of the store failed from that event on, so no socket on
/// it got any event until it was upgraded, and its replays failed too. A kind this release does
/// not know is passed on as it came, under its own name (clients treat any `order_…` frame as a
/// signal to refetch the order, docs/PROTOCOL.md), and its cursor is the same one the newer node
/// gives it: the fingerprint is computed over the name.
public struct OrderEventType: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    public static let created = OrderEventType(known: "order_created")
    public static let updated = OrderEventType(known: "order_updated")
    public static let statusChanged = OrderEventType(known: "order_status_changed")
    public static let assigned = OrderEventType(known: "order_assigned")
    public static let unassigned = OrderEventType(known: "order_unassigned")
    public static let deleted = OrderEventType(known: "order_deleted")
    /// The assigned driver's device reported showing a version (SPEC §3): to `company_` and
    /// `fleet_` only, never to a driver group. Not a change of the order: no new version.
    public static let seen = OrderEventType(known: "order_seen")

    /// The kinds this release makes.
    public static let allCases: [OrderEventType] = [
        .created, .updated, .statusChanged, .assigned, .unassigned, .deleted, .seen,
    ]

    public let rawValue: String

    /// A kind by name: one of `allCases`, or any `order_` name of lower-case ASCII letters and
    /// underscores, at most 64 bytes (a newer release's kind); `nil` for anything else (a damaged
    /// row, a hostile broker message). The name goes into frames as it is, so nothing that would
    /// need escaping gets through.
    public init?(rawValue: String) {
        let bytes = rawValue.utf8
        guard bytes.count > 6, bytes.count <= 64, rawValue.hasPrefix("order_"),
            bytes.allSatisfy({ (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) || $0 == UInt8(ascii: "_") })
        else { return nil }
        self.rawValue = rawValue
    }

    private init(known: String) { rawValue = known }

    /// Whether this release makes events of this kind (a newer release's kind is not known).
    public var isKnown: Bool { Self.allCases.contains(self) }

    public var description: String { rawValue }
}

/// One event as the broadcaster decides it, before the outbox gives it an id.
public struct OrderEvent: Sendable, Equatable {
    public var type: OrderEventType
    public var companyID: CompanyID
    public var orderID: OrderID
    public var number: String
    public var oldStatus: OrderStatus?
    public var newStatus: OrderStatus
    public var driverID: UserID?
    /// The driver the order was taken from, on assignment changes.
    public var oldDriverID: UserID?
    public var changedAt: Date
    /// Who receives it. Never empty.
    public var groups: [Group]
    /// `order_seen` only: the order version the driver's device reported showing (`changedAt`
    /// is when it was recorded, `driverID` the driver).
    public var seenVersion: Int?

    public init(
        type: OrderEventType, companyID: CompanyID, orderID: OrderID, number: String, oldStatus: OrderStatus?,
        newStatus: OrderStatus, driverID: UserID?, oldDriverID: UserID? = nil, changedAt: Date, groups: [Group],
        seenVersion: Int? = nil
    ) {
        self.type = type
        self.companyID = companyID
        self.orderID = orderID
        self.number = number
        self.oldStatus = oldStatus
        self.newStatus = newStatus
        self.driverID = driverID
        self.oldDriverID = oldDriverID
        self.changedAt = changedAt
        self.groups = groups
        self.seenVersion = seenVersion
    }
}

/// An event committed to the outbox: its id is the resume cursor every node agrees on.
public struct StoredEvent: Sendable, Equatable {
    public var id: EventID { didSet { check = Self.check(id, event, committedAt, salt) } }
    public var event: OrderEvent { didSet { check = Self.check(id, event, committedAt, salt) } }
    /// When its transaction committed, at millisecond precision (every store round-trips
    /// milliseconds exactly: the cursor's fingerprint is computed from them).
    public var committedAt: Date { didSet { check = Self.check(id, event, committedAt, salt) } }
    /// A random number the store keeps with the event and never sends to a client, hashed into the
    /// cursor's check (`EventCursor`): without it, anyone could compute the check of any event from
    /// its id, kind, order and commit time, and so, from the check of an event of *another company*
    /// (every `connected` and `pong` frame carries the cursor of the newest event the node knows),
    /// guess those by brute force: that company's order ids, kinds of change and their times (found
    /// by a review, 2026-12-05). 0 for events stored before migration 0013: their cursors stay.
    public var salt: Int64 { didSet { check = Self.check(id, event, committedAt, salt) } }
    /// The cursor's fingerprint, computed once and again whenever a field it covers changes: an
    /// event on its way out needed it three times (the feed's delivered mark, the frame, the
    /// hub's newest), each a hash over its fields' digits (0.8 % of a write's CPU in all).
    private var check: String

    public init(id: EventID, event: OrderEvent, committedAt: Date = Date(timeIntervalSince1970: 0), salt: Int64 = 0) {
        self.id = id
        self.event = event
        self.committedAt = committedAt
        self.salt = salt
        check = Self.check(id, event, committedAt, salt)
    }

    private static func check(_ id: EventID, _ event: OrderEvent, _ committedAt: Date, _ salt: Int64) -> String {
        EventCursor.fingerprint(id: id, type: event.type, orderID: event.orderID, committedAt: committedAt, salt: salt)
    }

    /// A salt for a new event: 1 up to `Int64.max`, from the system's secure generator.
    public static func newSalt() -> Int64 { SaltPool.shared.next() }

    /// The resume cursor of this event: its id plus a fingerprint of what was stored under it.
    public var cursor: EventCursor { EventCursor(id: id, check: check) }
}

/// Salts from the system's secure generator (`arc4random_buf`, the kernel's `getrandom`), drawn
/// 64 at a time: `SystemRandomNumberGenerator` made one system call per event, that is one per
/// write (docs/BENCHMARKS.md, 2026-12-06 04:55). Shared by the store threads that append events.
private final class SaltPool: Sendable {
    static let shared = SaltPool()
    private let state = Mutex<(values: [UInt64], next: Int)>(([], 0))

    func next() -> Int64 {
        state.withLock { state in
            while true {
                if state.next == state.values.count {
                    var fresh = [UInt64](repeating: 0, count: 64)
                    fresh.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
                    state = (fresh, 0)
                }
                let salt = Int64(bitPattern: state.values[state.next] >> 1)  // 0 up to Int64.max
                state.next += 1
                if salt != 0 { return salt }
            }
        }
    }
}
