import Foundation
import Testing
import WaybillDomain

struct BroadcasterTests {
    let now = Date(timeIntervalSince1970: 1_800_000_000.123)

    func order(status: OrderStatus, driver: UserID?) -> Order {
        Order(id: 42, companyID: 3, number: "2026/11/0042", status: status, driverID: driver, title: "t",
              createdAt: now, updatedAt: now)
    }

    @Test func createdWithoutDriverGoesToPanelAndFleetOnly() {
        let events = Broadcaster.events(for: .created(order(status: .new, driver: nil)), at: now)
        #expect(events.map(\.type) == [.created])
        #expect(events[0].groups == [.company(3), .fleet(3)])
    }

    @Test func statusChangeReachesTheAssignedDriver() {
        let before = order(status: .assigned, driver: 7), after = order(status: .accepted, driver: 7)
        let events = Broadcaster.events(for: .statusChanged(before: before, after: after), at: now)
        #expect(events.count == 1)
        #expect(events[0].type == .statusChanged)
        #expect(events[0].oldStatus == .assigned && events[0].newStatus == .accepted)
        #expect(events[0].groups == [.company(3), .fleet(3), .driver(7)])
    }

    @Test func reassignmentTellsTheOldDriverUnassignedAndTheNewOneAssigned() {
        let before = order(status: .assigned, driver: 7), after = order(status: .assigned, driver: 8)
        let events = Broadcaster.events(for: .assigned(before: before, after: after), at: now)
        #expect(events.map(\.type) == [.assigned, .assigned, .unassigned])
        // The panel and the fleet see both drivers.
        #expect(events[0].groups == [.company(3), .fleet(3)])
        #expect(events[0].oldDriverID == 7 && events[0].driverID == 8)
        // Each driver's frame names only that driver (SPEC §3).
        #expect(events[1].groups == [.driver(8)])
        #expect(events[1].driverID == 8 && events[1].oldDriverID == nil)
        #expect(events[2].groups == [.driver(7)])
        #expect(events[2].driverID == nil && events[2].oldDriverID == 7)
    }

    @Test func noFrameToADriverNamesAnotherDriver() {
        let orders = [order(status: .assigned, driver: 7), order(status: .assigned, driver: 8), order(status: .new, driver: nil)]
        var changes: [OrderChange] = []
        for before in orders {
            for after in orders { changes.append(.assigned(before: before, after: after)) }
            changes.append(.unassigned(before: before, after: orders[2]))
            changes += [.created(before), .deleted(before), .updated(before: before, after: before)]
        }
        for change in changes {
            for event in Broadcaster.events(for: change, at: now) {
                for case .driver(let driver) in event.groups {
                    let named = [event.driverID, event.oldDriverID].compactMap { $0 }
                    #expect(named.allSatisfy { $0 == driver }, "\(change) sends \(event) to driver \(driver)")
                    #expect(event.groups == [.driver(driver)] || event.groups.contains(.company(3)))
                }
            }
        }
    }

    @Test func firstAssignmentIsOneEventForPanelFleetAndDriver() {
        let before = order(status: .new, driver: nil), after = order(status: .assigned, driver: 8)
        let events = Broadcaster.events(for: .assigned(before: before, after: after), at: now)
        #expect(events.count == 1)
        #expect(events[0].groups == [.company(3), .fleet(3), .driver(8)])
        #expect(events[0].oldDriverID == nil)
    }

    @Test func unassignReachesTheDriverWhoLostTheOrder() {
        let before = order(status: .assigned, driver: 7), after = order(status: .new, driver: nil)
        let events = Broadcaster.events(for: .unassigned(before: before, after: after), at: now)
        #expect(events.map(\.type) == [.unassigned])
        #expect(events[0].groups == [.company(3), .fleet(3), .driver(7)])
        #expect(events[0].newStatus == .new && events[0].oldStatus == .assigned)
    }

    @Test func deleteReachesTheAssignedDriver() {
        let events = Broadcaster.events(for: .deleted(order(status: .accepted, driver: 7)), at: now)
        #expect(events.map(\.type) == [.deleted])
        #expect(events[0].groups.contains(.driver(7)))
    }

    @Test func frameHasEveryFieldOfTheSpec() throws {
        let before = order(status: .assigned, driver: 7), after = order(status: .accepted, driver: 7)
        let event = Broadcaster.events(for: .statusChanged(before: before, after: after), at: now)[0]
        let committed = Date(timeIntervalSince1970: 1_800_000_000.5)
        let json = EventFrame.json(StoredEvent(id: 1234, event: event, committedAt: committed))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "order_status_changed")
        #expect(object["id"] as? Int == 42 && object["order_id"] as? Int == 42)
        #expect(object["number"] as? String == "2026/11/0042")
        #expect(object["old_status"] as? String == "assigned" && object["new_status"] as? String == "accepted")
        #expect(object["driver_id"] as? Int == 7)
        #expect(object["changed_at"] as? String == "2027-01-15T08:00:00.123Z")
        #expect(object["event_id"] as? Int == 1234)
        let cursorText = try #require(object["cursor"] as? String)
        let cursor = try #require(EventCursor(parsing: cursorText))
        #expect(cursor.id == 1234)
        #expect(cursor.matches(StoredEvent(id: 1234, event: event, committedAt: committed)))
    }

    @Test func timestampsBefore1970KeepAValidFraction() {
        #expect(Timestamp.string(Date(timeIntervalSince1970: -0.5)) == "1969-12-31T23:59:59.500Z")
        #expect(Timestamp.string(Date(timeIntervalSince1970: 0.25)) == "1970-01-01T00:00:00.250Z")
    }

    @Test func groupNamesRoundTrip() {
        for group in [Group.company(1), .fleet(2), .driver(3)] { #expect(Group(name: group.name) == group) }
        // The wire names themselves (SPEC §3), a long id too (past a small string's 15 bytes).
        #expect([Group.company(1), .fleet(2), .driver(3)].map(\.name) == ["company_1", "fleet_2", "driver_3"])
        #expect(Group.driver(UserID(Int64.max)).name == "driver_9223372036854775807")
        // Written byte by byte: every length of number, and a sign (never a real id, still its text).
        for raw: Int64 in [0, 1, 9, 10, 99, 100, 12_345, 1_000_000_007, Int64.max, -1, -40, Int64.min] {
            #expect(Group.company(CompanyID(raw)).name == "company_\(raw)")
            #expect(Group.fleet(CompanyID(raw)).name == "fleet_\(raw)")
            #expect(Group.driver(UserID(raw)).name == "driver_\(raw)")
        }
        #expect(Group.company(CompanyID(Int64.min)).name.utf8.count == Group.longestName)
        #expect(Group(name: Group.company(CompanyID(Int64.max)).name) == .company(CompanyID(Int64.max)))
        #expect(Group(name: "driver_x") == nil)
        #expect(Group(name: "pilot_1") == nil)
    }

    @Test func quotedEscapesControlAndMarkup() {
        #expect(EventFrame.quoted("a\"b\\c\n<") == "\"a\\\"b\\\\c\\n\\u003c\"")
        // A pong names the newest delivered event, as `connected` does.
        #expect(EventFrame.pong(newest: EventCursor(id: 1234, check: "0b7e55d1"))
            == #"{"type":"pong","event_id":1234,"cursor":"1234-0b7e55d1"}"#)
    }
}
