import Testing

@testable import WaybillClient

@Suite(.timeLimit(.minutes(1))) struct ServerFrameTests {
    @Test func orderEventYieldsTypeOrderIdAndEventId() {
        let frame = ServerFrame.parse(
            #"{"type":"order_status_changed","id":42,"order_id":42,"number":"2026/11/0042","old_status":"assigned","new_status":"accepted","driver_id":7,"changed_at":"2026-11-30T10:15:00.123Z","event_id":1234}"#
        )
        #expect(frame == .event(OrderEventFrame(kind: .statusChanged, orderID: 42, eventID: 1234)))
    }

    @Test func orderIdIsReadFromEitherField() {
        #expect(
            ServerFrame.parse(#"{"type":"order_deleted","id":5,"event_id":9}"#)
                == .event(OrderEventFrame(kind: .deleted, orderID: 5, eventID: 9))
        )
        #expect(
            ServerFrame.parse(#"{"type":"order_created","order_id":6,"event_id":10}"#)
                == .event(OrderEventFrame(kind: .created, orderID: 6, eventID: 10))
        )
    }

    @Test func connectedFrameCarriesNewestEventId() {
        #expect(
            ServerFrame.parse(#"{"type":"connected","user_id":7,"groups":["driver_7"],"event_id":1230}"#)
                == .connected(ConnectedFrame(userID: 7, groups: ["driver_7"], newestEventID: 1230))
        )
    }

    @Test func pongAndResetAreToldApart() {
        #expect(ServerFrame.parse(#"{"type":"pong"}"#) == .pong)
        #expect(ServerFrame.parse(#"{"type":"reset"}"#) == .reset)
    }

    /// A pong may say how far its socket is (the server's newest delivered event); a bare one, or
    /// one with half of it, says nothing.
    @Test func aPongsPositionIsReadWhenItHasOne() {
        let full = ServerFrame.parseWithPosition(#"{"type":"pong","event_id":1234,"cursor":"1234-0b7e55d1"}"#)
        #expect(full.frame == .pong)
        #expect(full.position == ServerFrame.Position(eventID: 1234, cursor: ResumeCursor("1234-0b7e55d1")))
        #expect(ServerFrame.parseWithPosition(#"{"type":"pong"}"#).position == nil)
        #expect(ServerFrame.parseWithPosition(#"{"type":"pong","event_id":1234}"#).position == nil)
        #expect(ServerFrame.parseWithPosition(#"{"type":"order_updated","id":4,"event_id":12,"cursor":"12-a"}"#).position == nil)
    }

    @Test func unknownTypesAreIgnorableNotMalformed() {
        #expect(ServerFrame.parse(#"{"type":"hello","x":1}"#) == .unknown(type: "hello"))
    }

    @Test func newOrderEventTypesStillCountAsOrderEvents() {
        #expect(
            ServerFrame.parse(#"{"type":"order_document_added","order_id":3,"event_id":4}"#)
                == .event(
                    OrderEventFrame(kind: OrderEventKind(rawValue: "order_document_added"), orderID: 3, eventID: 4)
                )
        )
    }

    @Test(arguments: [
        "", "not json", "[]", "[1,2]", "42", "null", #"{"#, #"{}"#, #"{"type":7}"#, #"{"type":null}"#,
        #"{"type":"order_updated","event_id":3}"#, #"{"type":"order_updated","order_id":3}"#,
        #"{"type":"order_updated","order_id":"3","event_id":4}"#, #"{"type":"connected"}"#,
        "{\"type\":\"order_updated\",\"order_id\":1e400,\"event_id\":1}", "\u{0}\u{FFFF}",
    ])
    func malformedFramesNeverCrash(text: String) {
        #expect(ServerFrame.parse(text) == .malformed)
    }
}
