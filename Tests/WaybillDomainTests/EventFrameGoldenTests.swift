import Foundation
import Testing
import WaybillDomain

/// The event frame byte for byte (`EventFrame.json`, built by appending into one reserved string):
/// every branch of the shape, and a number that needs escaping.
struct EventFrameGoldenTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000.123)

    static func event(
        _ type: OrderEventType, number: String = "2026/11/0042", old: OrderStatus? = .assigned, driver: UserID? = 7,
        oldDriver: UserID? = nil, seen: Int? = nil
    ) -> StoredEvent {
        let event = OrderEvent(
            type: type, companyID: 3, orderID: 42, number: number, oldStatus: old, newStatus: .accepted,
            driverID: driver, oldDriverID: oldDriver, changedAt: at, groups: [.company(3), .fleet(3)],
            seenVersion: seen)
        return StoredEvent(id: 1234, event: event, committedAt: at)
    }

    @Test func framesAreByteForByteTheSpecShape() {
        let cases: [(StoredEvent, String)] = [
            (Self.event(.statusChanged), #"{"type":"order_status_changed","id":42,"order_id":42,"number":"2026/11/0042","old_status":"assigned","new_status":"accepted","driver_id":7,"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-ceca06d4"}"#),
            (Self.event(.created, old: nil, driver: nil), #"{"type":"order_created","id":42,"order_id":42,"number":"2026/11/0042","old_status":null,"new_status":"accepted","driver_id":null,"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-fadc14bb"}"#),
            (Self.event(.assigned, oldDriver: nil), #"{"type":"order_assigned","id":42,"order_id":42,"number":"2026/11/0042","old_status":"assigned","new_status":"accepted","driver_id":7,"old_driver_id":null,"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-1622d367"}"#),
            (Self.event(.unassigned, driver: nil, oldDriver: 7), #"{"type":"order_unassigned","id":42,"order_id":42,"number":"2026/11/0042","old_status":"assigned","new_status":"accepted","driver_id":null,"old_driver_id":7,"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-fa25ca1e"}"#),
            (Self.event(.seen, seen: 5), #"{"type":"order_seen","id":42,"order_id":42,"number":"2026/11/0042","old_status":"assigned","new_status":"accepted","driver_id":7,"seen":{"driver_id":7,"version":5,"at":"2027-01-15T08:00:00.123Z"},"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-c936f45e"}"#),
            (Self.event(.updated, number: "quote \" back\\ <b>\n\u{1}é"), #"{"type":"order_updated","id":42,"order_id":42,"number":"quote \" back\\ \u003cb>\n\u0001é","old_status":"assigned","new_status":"accepted","driver_id":7,"changed_at":"2027-01-15T08:00:00.123Z","event_id":1234,"cursor":"1234-272a7e52"}"#),
        ]
        for (stored, expected) in cases {
            // Bytes, not text: `String`'s `==` takes canonically equivalent spellings as equal.
            #expect(EventFrame.utf8(stored) == Array(expected.utf8))
            #expect(Array(EventFrame.json(stored).utf8) == Array(expected.utf8))
        }
    }

    /// The wire's escaping, written out here by scalar as the reference: `"`, `\`, newline,
    /// return and tab in JSON's short forms, `<` and every other control character as `\u00xx`
    /// (lower-case hex), everything else as it is.
    static func escaped(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"
            case _ where scalar.value < 0x20: out += "\\u00" + (scalar.value < 0x10 ? "0" : "") + String(scalar.value, radix: 16)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// The frame's bytes (escaped by byte) and `EventFrame.quoted` escape a number as the
    /// reference does by scalar, for every ASCII character and a few that are not.
    @Test func theNumberIsEscapedLikeEveryOtherStringOfTheWire() {
        let texts = (0..<0x80).map { String(UnicodeScalar(UInt8($0))) } + ["é", "日本", "🚚", "a\u{7f}b", ""]
        for text in texts {
            let frame = EventFrame.utf8(Self.event(.updated, number: text))
            let field = Array("\"number\":\(Self.escaped(text)),\"old_status\"".utf8)
            #expect(frame.firstRange(of: field) != nil, "\(Array(text.unicodeScalars))")
            #expect(Array(EventFrame.quoted(text).utf8) == Array(Self.escaped(text).utf8), "\(Array(text.unicodeScalars))")
        }
    }

    /// Ids of every size go out as their decimal digits.
    @Test func idsOfEverySizeAreWrittenInFull() {
        for raw: Int64 in [0, 1, 9, 10, 99, 1_000_000_007, Int64.max, -1, -10, Int64.min] {
            let event = OrderEvent(
                type: .updated, companyID: 3, orderID: OrderID(raw), number: "n", oldStatus: nil, newStatus: .accepted,
                driverID: UserID(raw), oldDriverID: nil, changedAt: Self.at, groups: [.company(3)])
            let frame = EventFrame.utf8(StoredEvent(id: EventID(raw), event: event, committedAt: Self.at))
            for piece in ["\"id\":\(raw),\"order_id\":\(raw),", "\"driver_id\":\(raw),", "\"event_id\":\(raw),\"cursor\":\"\(raw)-"] {
                #expect(frame.firstRange(of: Array(piece.utf8)) != nil, "\(piece)")
            }
        }
    }
}
