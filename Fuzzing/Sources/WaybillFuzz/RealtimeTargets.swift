@testable import WaybillRealtime
import WaybillDomain
import WaybillNetwork

extension FuzzTarget {
    /// The upgrade request's query (`Handshake`: ticket, token, stream, cursor, since), one
    /// `name=value` per line.
    ///
    /// Checks: a cursor that parses prints back to a cursor that parses to the same value.
    static let webSocketHandshake = FuzzTarget(name: "ws-handshake", summary: "WebSocket upgrade query") { input in
        var query: [(name: String, value: String)] = []
        while !input.isEmpty { query.append(FuzzRequest.pair(input.line())) }
        let handshake = Handshake(HTTPRequest(method: "GET", path: "/ws/orders/", query: query))
        switch handshake.resume {
        case .cursor(let cursor):
            FuzzCheck.expect(EventCursor(parsing: cursor.description) == cursor, "cursor \(cursor) does not round-trip")
        case .since(let id):
            FuzzCheck.expect(id.rawValue >= 0, "negative since")
        case .none:
            break
        case .unusable:
            // Only for a resume value that was given.
            let given = query.contains { ($0.name == "cursor" || $0.name == "since") && !$0.value.isEmpty }
            FuzzCheck.expect(given, "unusable without a cursor or since")
        }
    }

    /// Text frames a client sends to the hub (`ClientFrame`: ping and `seen`): the whole input is one frame.
    ///
    /// Checks: the canonical ping is a ping; a `seen` frame never yields more than
    /// `maxSeenOrders` entries, and only positive ids and versions (what the store may be asked to record).
    static let clientFrame = FuzzTarget(name: "ws-client-frame", summary: "client → hub text frames") { input in
        let text = input.restText()
        let frame = ClientFrame.parse(text)
        if text == #"{"type":"ping"}"# { FuzzCheck.expect(frame == .ping, "the canonical ping is not a ping") }
        if case .seen(let reports) = frame {
            FuzzCheck.expect(!reports.isEmpty && reports.count <= ClientFrame.maxSeenOrders, "seen: \(reports.count) entries")
            for report in reports {
                FuzzCheck.expect(report.orderID.rawValue > 0 && report.version > 0, "seen: \(report)")
            }
        }
    }
}
