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
        // `cursor` is preferred (it notices a rewound history); `since` stays accepted, unchecked.
        // A malformed cursor counts as absent, like a malformed `since`.
        if let cursor = request.queryValue("cursor").flatMap(EventCursor.init(parsing:)) {
            resume = .cursor(cursor)
        } else if let since = request.queryValue("since").flatMap({ Int64($0) }) {
            resume = .since(EventID(max(0, since)))
        } else {
            resume = .none
        }
    }
}
