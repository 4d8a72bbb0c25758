import Testing
import WaybillDomain

@testable import WaybillRealtime

/// Client → server frames (SPEC §4): ping, `seen` from drivers, everything else ignored.
struct ClientFrameTests {
    @Test func pingsAreRecognised() {
        #expect(ClientFrame.parse(#"{"type":"ping"}"#) == .ping)
        #expect(ClientFrame.parse(#"{ "type" : "ping", "extra": 1 }"#) == .ping)
    }

    @Test func seenFramesGiveTheirEntries() {
        let frame = ClientFrame.parse(#"{"type":"seen","orders":[{"id":42,"version":5},{"id":7,"version":1}]}"#)
        #expect(frame == .seen([SeenReport(orderID: 42, version: 5), SeenReport(orderID: 7, version: 1)]))
    }

    @Test func malformedSeenFramesAreIgnored() {
        for text in [
            #"{"type":"seen"}"#,
            #"{"type":"seen","orders":{}}"#,
            #"{"type":"seen","orders":[]}"#,
            #"{"type":"seen","orders":[{"id":"42","version":5}]}"#,
            #"{"type":"seen","orders":[{"id":42,"version":5.5}]}"#,
            #"{"type":"seen","orders":[{"id":42}]}"#,
            #"{"type":"seen","orders":[{"id":0,"version":5},{"id":-1,"version":2},{"id":3,"version":0}]}"#,
            #"{"type":"seen","orders":[{"id":42,"version":5}]"#,
            #"[1,2]"#, "", "seen",
        ] {
            #expect(ClientFrame.parse(text) == .ignored, "\(text)")
        }
    }

    @Test func entriesBeyondAHundredAreIgnored() {
        let entries = (1...150).map { #"{"id":\#($0),"version":1}"# }.joined(separator: ",")
        guard case .seen(let reports) = ClientFrame.parse(#"{"type":"seen","orders":["# + entries + "]}") else {
            Issue.record("not parsed as seen")
            return
        }
        #expect(reports.count == ClientFrame.maxSeenOrders)
        #expect(reports.last?.orderID == OrderID(100))
    }
}
