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
        }
    }

    /// Text frames a client sends to the hub (`ClientFrame`): the whole input is one frame.
    static let clientFrame = FuzzTarget(name: "ws-client-frame", summary: "client → hub text frames") { input in
        let text = input.restText()
        let isPing = ClientFrame.isPing(text)
        if text == #"{"type":"ping"}"# { FuzzCheck.expect(isPing, "the canonical ping is not a ping") }
    }
}
