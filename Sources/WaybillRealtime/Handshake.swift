import Foundation
import WaybillDomain
import WaybillNetwork

/// What the upgrade request asked for.
struct Handshake: Sendable {
    var ticket: String?
    var token: String?
    var resume: ConnectionMachine<OutboundFrame>.Resume
    var wantsFleet: Bool

    init(_ request: HTTPRequest) {
        ticket = request.queryValue("ticket")
        token = request.queryValue("token")
        wantsFleet = request.queryValue("stream") == "fleet"
        resume = Self.resume(cursor: request.queryValue("cursor"), since: request.queryValue("since"))
    }

    /// `cursor` is preferred (it notices a rewound history); `since` stays accepted, unchecked. A
    /// value given but unreadable is `.unusable` (the client gets `reset`), not "no resume": going
    /// live from the newest event would silently skip what the client missed. A cursor's check is
    /// read in either case (the server writes it in lower case).
    static func resume(cursor: String?, since: String?) -> ConnectionMachine<OutboundFrame>.Resume {
        if let cursor, !cursor.isEmpty {
            guard let parsed = EventCursor(parsing: cursor.lowercased()) else { return .unusable }
            return .cursor(parsed)
        }
        if let since, !since.isEmpty {
            // A negative id names no event: unreadable, as a cursor's is (a review, 2026-12-07:
            // `since=-1` was read as 0 and replayed the group's whole retained history).
            guard let id = Int64(since), id >= 0 else { return .unusable }
            return .since(EventID(id))
        }
        return .none
    }
}
