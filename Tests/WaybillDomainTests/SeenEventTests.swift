import Foundation
import Testing
import WaybillDomain

/// `order_seen` (SPEC §3): to the panel and the fleet only, never to a driver; the frame names
/// the version seen, by whom and when.
struct SeenEventTests {
    let at = Date(timeIntervalSince1970: 1_800_000_000.25)

    func summary(seen: OrderReceipt?) -> OrderSummary {
        OrderSummary(
            id: 42, number: "2026/11/0042", status: .accepted, driverID: 7, title: "t", createdAt: at, updatedAt: at,
            version: 5, seen: seen)
    }

    @Test func seenGoesToPanelAndFleetOnly() {
        let events = Broadcaster.events(
            for: .seen(summary(seen: OrderReceipt(driverID: 7, version: 5, at: at)), company: 3), at: at)
        #expect(events.map(\.type) == [.seen])
        #expect(events[0].groups == [.company(3), .fleet(3)])
        #expect(events[0].driverID == 7)
        #expect(events[0].seenVersion == 5)
        #expect(events[0].changedAt == at)
    }

    @Test func noReceiptNoEvent() {
        #expect(Broadcaster.events(for: .seen(summary(seen: nil), company: 3), at: at).isEmpty)
    }

    @Test func theFrameCarriesTheReceipt() throws {
        let event = Broadcaster.events(
            for: .seen(summary(seen: OrderReceipt(driverID: 7, version: 4, at: at)), company: 3), at: at)[0]
        let json = EventFrame.json(StoredEvent(id: 99, event: event, committedAt: at))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "order_seen")
        #expect(object["id"] as? Int == 42 && object["order_id"] as? Int == 42)
        #expect(object["number"] as? String == "2026/11/0042")
        #expect(object["driver_id"] as? Int == 7)
        #expect(object["new_status"] as? String == "accepted")
        let seen = try #require(object["seen"] as? [String: Any])
        #expect(seen["driver_id"] as? Int == 7 && seen["version"] as? Int == 4)
        #expect(seen["at"] as? String == "2027-01-15T08:00:00.250Z")
        #expect(object["changed_at"] as? String == "2027-01-15T08:00:00.250Z")
        #expect(object["event_id"] as? Int == 99)
    }

    @Test func receiptsCountOnlyForTheAssignedDriver() {
        #expect(
            OrderReceipt.stored(driverID: 7, version: 3, at: at, assignedTo: 7)
                == OrderReceipt(driverID: 7, version: 3, at: at))
        #expect(OrderReceipt.stored(driverID: 7, version: 3, at: at, assignedTo: 8) == nil)
        #expect(OrderReceipt.stored(driverID: 7, version: 3, at: at, assignedTo: nil) == nil)
        #expect(OrderReceipt.stored(driverID: nil, version: nil, at: nil, assignedTo: 7) == nil)
    }
}
