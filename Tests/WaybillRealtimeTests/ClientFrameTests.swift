import Foundation
import Testing
import WaybillDomain
import WaybillTesting

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

/// `ClientFrame.parse` as it was with Foundation's `JSONDecoder`: the reference the `JSONReader`
/// version must agree with on every frame.
private enum ReferenceClientFrame {
    private struct Head: Decodable { var type: String }

    private struct Seen: Decodable {
        struct Entry: Decodable {
            var id: Int64
            var version: Int
        }
        var orders: [Entry]
    }

    static func parse(_ text: String) -> ClientFrame {
        if text == #"{"type":"ping"}"# { return .ping }
        guard text.utf8.count <= 8192, let data = text.data(using: .utf8),
            let head = try? JSONDecoder().decode(Head.self, from: data)
        else { return .ignored }
        switch head.type {
        case "ping":
            return .ping
        case "seen":
            guard let frame = try? JSONDecoder().decode(Seen.self, from: data) else { return .ignored }
            let reports = frame.orders.prefix(ClientFrame.maxSeenOrders).compactMap { entry -> SeenReport? in
                guard entry.id > 0, entry.version > 0, entry.version <= Int(Int32.max) else { return nil }
                return SeenReport(orderID: OrderID(entry.id), version: entry.version)
            }
            return reports.isEmpty ? .ignored : .seen(reports)
        default:
            return .ignored
        }
    }
}

extension ClientFrameTests {
    /// The parser that replaced `JSONDecoder` reads every frame as it did, except where
    /// `KnownJSONDifference` allows (a trailing comma or UTF-16/32, which it ignores as not RFC 8259
    /// JSON; numbers past `Double`'s exactness, which it reads exactly): hand-made variants, then
    /// thousands of seeded corruptions of a ping and of a `seen` frame.
    @Test func theParserAgreesWithJSONDecoderOnEveryFrame() {
        let seen = #"{"type":"seen","orders":[{"id":42,"version":5},{"id":7,"version":1}]}"#
        let variants = [
            #"{"type":"ping","type":"seen"}"#, #"{"type":"seen","type":"ping"}"#, #"{"type":null}"#, #"{"type":1}"#,
            #"{"type":"seen","orders":null}"#, #"{"type":"seen","orders":[{"id":42,"version":5,"id":8}]}"#,
            #"{"type":"seen","orders":[{"id":42.0,"version":5e0}]}"#, #"{"type":"seen","orders":[{"id":42,"version":null}]}"#,
            #"{"type":"seen","orders":[{"id":42,"version":2147483648}]}"#, #"{"type":"seen","orders":[null]}"#,
            #"{"type":"seen","orders":[{"id":42,"version":5}],"orders":[]}"#, " \(seen) ", "\u{FEFF}\(seen)",
            #"{"type":"seen","orders":[{"id":9223372036854775807,"version":1}]}"#,
            #"{"type":"seen","orders":[{"id":9223372036854775808,"version":1}]}"#,
            "{\t\"type\" :\r\n\"seen\",\"orders\":[ {\"id\":42, \"version\":5E0 } ]}",
        ]
        for text in variants {
            #expect(ClientFrame.parse(text) == ReferenceClientFrame.parse(text), "\(text)")
        }
        #expect(ClientFrame.parse(#"{"type":"ping",}"#) == .ignored, "not JSON (JSONDecoder took it)")
        let long = "{\"type\":\"seen\",\"orders\":[" + (1...120).map { "{\"id\":\($0),\"version\":1}" }.joined(separator: ",") + "]}"
        var random = SeededGenerator(seed: 20_261_204)
        var seenAccepted = 0
        for base in [#"{"type":"ping","x":[1]}"#, seen, long] {
            for round in 0..<1500 {
                let bytes = random.corrupted(Array(base.utf8), edits: 1 + round % 3)
                let text = String(decoding: bytes, as: UTF8.self)
                let parsed = ClientFrame.parse(text)
                if case .seen = parsed { seenAccepted += 1 }
                #expect(Self.agreeWithReference(bytes), "\(text)")
            }
        }
        #expect(seenAccepted > 50, "\(seenAccepted) corrupted seen frames still read")
    }
}

extension ClientFrameTests {
    /// Whether `ClientFrame.parse` reads `bytes` as the `JSONDecoder` reference does, or differs
    /// only where `KnownJSONDifference` allows: a frame that is not RFC 8259 JSON is ignored, and
    /// past a number `Double` cannot hold exactly nothing else may differ.
    static func agreeWithReference(_ bytes: [UInt8]) -> Bool {
        let text = String(decoding: bytes, as: UTF8.self)
        let parsed = ClientFrame.parse(text)
        if parsed == ReferenceClientFrame.parse(text) { return true }
        switch KnownJSONDifference.of(bytes) {
        case .trailingComma?, .notUTF8?: return parsed == .ignored
        case .inexactNumber?: return agreeWithReference(KnownJSONDifference.withInexactNumbersReplaced(bytes))
        case nil: return false
        }
    }
}
