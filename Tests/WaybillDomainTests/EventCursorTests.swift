import Foundation
import Testing
import WaybillDomain

struct EventCursorTests {
    private func stored(id: EventID, order: OrderID = 42, type: OrderEventType = .updated, millis: Int64) -> StoredEvent {
        let event = OrderEvent(
            type: type, companyID: 1, orderID: order, number: "2026/11/0042", oldStatus: nil, newStatus: .new,
            driverID: nil, changedAt: Date(timeIntervalSince1970: 1_800_000_000), groups: [.company(1)])
        return StoredEvent(id: id, event: event, committedAt: Date(timeIntervalSince1970: Double(millis) / 1000))
    }

    @Test func roundTripsThroughItsWireForm() throws {
        let cursor = stored(id: 1234, millis: 1_800_000_000_123).cursor
        #expect(cursor.description.hasPrefix("1234-"))
        #expect(cursor.check.count == 8)
        #expect(EventCursor(parsing: cursor.description) == cursor)
    }

    @Test func anotherEventUnderTheSameIdHasAnotherFingerprint() {
        let original = stored(id: 7, millis: 1_800_000_000_000)
        #expect(original.cursor.matches(original))
        // What a restored backup or a lagging standby hands out again under id 7.
        #expect(!original.cursor.matches(stored(id: 7, millis: 1_800_000_000_001)))
        #expect(!original.cursor.matches(stored(id: 7, order: 43, millis: 1_800_000_000_000)))
        #expect(!original.cursor.matches(stored(id: 7, type: .deleted, millis: 1_800_000_000_000)))
        #expect(!original.cursor.matches(stored(id: 8, millis: 1_800_000_000_000)))
    }

    @Test func subMillisecondDifferencesDoNotChangeIt() {
        // Stores keep milliseconds: a cursor must survive the round trip through any of them.
        let a = stored(id: 5, millis: 1_800_000_000_123)
        var b = a
        b.committedAt = a.committedAt.addingTimeInterval(0.0004)
        #expect(a.cursor == b.cursor)
    }

    @Test func everyMillisecondReadBackAsADivisionGivesTheSameFingerprint() {
        // Stores keep integer milliseconds and rebuild dates as `ms / 1000`; for a few percent of
        // values that double is just below the exact time. The fingerprint must not notice.
        let base: Int64 = 1_800_000_000_000
        for offset in Int64(0)..<2_000 {
            let ms = base + offset * 7
            let exact = stored(id: 9, millis: ms)
            var readBack = exact
            readBack.committedAt = Date(timeIntervalSince1970: Double(ms) / 1000)
            readBack.committedAt = Date(timeIntervalSinceReferenceDate: readBack.committedAt.timeIntervalSinceReferenceDate)
            #expect(exact.cursor == readBack.cursor)
        }
    }

    @Test(arguments: ["", "12", "12-", "-0b7e55d1", "x-0b7e55d1", "12-0b7e55d", "12-0B7E55D1", "12-0b7e55d1x", "-5-0b7e55d1"])
    func rejectsMalformedText(_ text: String) {
        #expect(EventCursor(parsing: text) == nil)
    }

    @Test func originIsTheCursorBeforeAnyEvent() {
        #expect(EventCursor.origin.description == "0-00000000")
        #expect(EventCursor(parsing: "0-00000000") == .origin)
    }
}
