internal import Foundation

/// What a WebSocket text frame from the server means to a client (SPEC §4).
///
/// Parsing never throws and never crashes: anything that is not a frame this client understands is
/// ``malformed`` or ``unknown(type:)``, and the session ignores both.
public enum ServerFrame: Hashable, Sendable {
    /// The first frame of a connection: the user, their groups and the newest event id the server knows.
    case connected(ConnectedFrame)
    /// Something happened to an order; refetch what shows it.
    case event(OrderEventFrame)
    /// The reply to the client's `{"type":"ping"}`.
    case pong
    /// The server cannot replay what was asked for: refetch everything shown.
    case reset
    /// Well-formed JSON with a `type` this client does not know (ignored, for forward compatibility).
    case unknown(type: String)
    /// Not JSON, not an object, no `type`, or an order event without its ids.
    case malformed

    /// Parses one text frame.
    ///
    /// `order_id` is preferred over `id` (the server sends both; older servers only one of them).
    /// Any `order_…` type with both ids counts as an order event, so event types added later still
    /// invalidate the right order.
    public static func parse(_ text: String) -> ServerFrame { parseWithPosition(text).frame }

    /// How far a pong says its socket has been sent everything: the server's newest delivered event
    /// (`{"type":"pong","event_id":…,"cursor":"…"}`; older servers send a bare pong).
    struct Position: Hashable, Sendable {
        var eventID: EventID
        var cursor: ResumeCursor
    }

    /// ``parse(_:)``, and for a pong that names one, the position.
    static func parseWithPosition(_ text: String) -> (frame: ServerFrame, position: Position?) {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: Data(text.utf8)), let type = wire.type else {
            return (.malformed, nil)
        }
        let frame = frame(type, wire)
        guard frame == .pong, let id = wire.eventID, let cursor = wire.cursor else { return (frame, nil) }
        return (frame, Position(eventID: EventID(id), cursor: ResumeCursor(cursor)))
    }

    private static func frame(_ type: String, _ wire: Wire) -> ServerFrame {
        switch type {
        case "connected":
            guard let userID = wire.userID else { return .malformed }
            return .connected(
                ConnectedFrame(
                    userID: userID,
                    groups: wire.groups ?? [],
                    newestEventID: wire.eventID.map { EventID($0) },
                    cursor: wire.cursor.map { ResumeCursor($0) }
                )
            )
        case "pong":
            return .pong
        case "reset":
            return .reset
        case let type where type.hasPrefix("order_"):
            guard let order = wire.orderID ?? wire.id, let event = wire.eventID else { return .malformed }
            return .event(
                OrderEventFrame(
                    kind: OrderEventKind(rawValue: type),
                    orderID: OrderID(order),
                    eventID: EventID(event),
                    cursor: wire.cursor.map { ResumeCursor($0) }
                )
            )
        default:
            return .unknown(type: type)
        }
    }

    /// The fields this client reads; everything else in a frame is ignored.
    private struct Wire: Decodable {
        var type: String?
        var id: Int64?
        var orderID: Int64?
        var eventID: Int64?
        var userID: Int64?
        var groups: [String]?
        var cursor: String?

        enum CodingKeys: String, CodingKey {
            case type, id, groups, cursor
            case orderID = "order_id"
            case eventID = "event_id"
            case userID = "user_id"
        }
    }
}

/// `{"type":"connected","user_id":7,"groups":["driver_7"],"event_id":1230,"cursor":"1230-9f3a61c2"}`.
public struct ConnectedFrame: Hashable, Sendable {
    /// The authenticated user.
    public var userID: Int64
    /// The groups the socket joined (e.g. `driver_7`).
    public var groups: [String]
    /// The newest event the server knows; `nil` if it has none yet.
    public var newestEventID: EventID?
    /// The cursor of that newest event; `nil` from servers that predate cursors.
    public var cursor: ResumeCursor?

    /// A connected frame with the given fields.
    public init(userID: Int64, groups: [String], newestEventID: EventID?, cursor: ResumeCursor? = nil) {
        self.userID = userID
        self.groups = groups
        self.newestEventID = newestEventID
        self.cursor = cursor
    }
}

/// An order event reduced to what a client acts on: which order, which kind, and its position in the log.
public struct OrderEventFrame: Hashable, Sendable {
    /// `order_status_changed`, `order_deleted`, …
    public var kind: OrderEventKind
    /// The order that changed.
    public var orderID: OrderID
    /// The event's position in the server's log (the resume cursor).
    public var eventID: EventID
    /// The event's cursor (`"<event_id>-<check>"`), the preferred resume point; `nil` from older servers.
    public var cursor: ResumeCursor?

    /// An event with the given fields.
    public init(kind: OrderEventKind, orderID: OrderID, eventID: EventID, cursor: ResumeCursor? = nil) {
        self.kind = kind
        self.orderID = orderID
        self.eventID = eventID
        self.cursor = cursor
    }
}

/// The `type` of an order event. A struct so that types added on the server later still parse.
public struct OrderEventKind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The wire spelling.
    public var rawValue: String
    /// A kind with the given wire spelling.
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// `order_created`
    public static let created = Self(rawValue: "order_created")
    /// `order_updated`
    public static let updated = Self(rawValue: "order_updated")
    /// `order_status_changed`
    public static let statusChanged = Self(rawValue: "order_status_changed")
    /// `order_assigned`
    public static let assigned = Self(rawValue: "order_assigned")
    /// `order_unassigned`
    public static let unassigned = Self(rawValue: "order_unassigned")
    /// `order_deleted`
    public static let deleted = Self(rawValue: "order_deleted")
}
