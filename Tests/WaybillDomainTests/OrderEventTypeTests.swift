import Foundation
import Testing

@testable import WaybillDomain

/// Kinds of event a newer release adds are read and passed on by a node of this release (a rolling
/// upgrade), under their own name and with the cursor the newer node gives them; anything that is
/// not an `order_` name is still refused.
struct OrderEventTypeTests {
    @Test func thisReleasesKindsAreKnownAndANewerOnesNameIsKept() throws {
        #expect(OrderEventType.allCases.map(\.rawValue) == [
            "order_created", "order_updated", "order_status_changed", "order_assigned", "order_unassigned",
            "order_deleted", "order_seen",
        ])
        for kind in OrderEventType.allCases {
            #expect(OrderEventType(rawValue: kind.rawValue) == kind)
            #expect(kind.isKnown)
        }
        let newer = try #require(OrderEventType(rawValue: "order_archived"))
        #expect(newer.rawValue == "order_archived")
        #expect(!newer.isKnown)
        #expect(newer != .updated)
    }

    @Test(arguments: [
        "", "order_", "created", "xorder_created", "Order_created", "order_Created", "order created",
        "order_\"x", "order_x\\", "order_x\n", "order_ü", "order_1", "order-x",
        "order_" + String(repeating: "x", count: 59),
    ])
    func whatIsNotAnOrderKindsNameIsRefused(_ name: String) {
        #expect(OrderEventType(rawValue: name) == nil)
    }

    @Test func theLongestNameIsSixtyFourBytes() {
        #expect(OrderEventType(rawValue: "order_" + String(repeating: "x", count: 58)) != nil)
    }

    /// The frame says the newer kind by name, and its cursor is the one every node computes: FNV-1a
    /// over `id|name|order|millis` (`EventCursorTests.theFingerprintIsFNV1aOfTheDocumentedText`).
    @Test func aNewerKindsFrameNamesItAndItsCursorIsTheNewerNodes() throws {
        let newer = try #require(OrderEventType(rawValue: "order_archived"))
        let event = StoredEvent(
            id: 41,
            event: OrderEvent(
                type: newer, companyID: 3, orderID: 9, number: "A-9", oldStatus: .completed, newStatus: .completed,
                driverID: 7, changedAt: Date(timeIntervalSince1970: 1_800_000_000.123), groups: [.company(3)]),
            committedAt: Date(timeIntervalSince1970: 1_800_000_000.123))
        let frame = EventFrame.json(event)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "order_archived")
        #expect(object["order_id"] as? Int == 9)
        var hash: UInt32 = 0x811c_9dc5
        for byte in "41|order_archived|9|1800000000123".utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        #expect(event.cursor.description == "41-" + String(repeating: "0", count: 8 - hex.count) + hex)
        #expect(object["cursor"] as? String == event.cursor.description)
    }
}
