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

    /// The fingerprint is kept with the event, so a change to any field it covers must renew it:
    /// a changed event must have the cursor of one made with those values from the start.
    @Test func changingAFieldGivesTheCursorOfAnEventMadeThatWay() {
        let base = stored(id: 7, millis: 1_800_000_000_000)
        var changed = base
        changed.id = EventID(8)
        #expect(changed.cursor == stored(id: 8, millis: 1_800_000_000_000).cursor)
        changed = base
        changed.event.orderID = OrderID(43)
        #expect(changed.cursor == stored(id: 7, order: 43, millis: 1_800_000_000_000).cursor)
        changed = base
        changed.event.type = .deleted
        #expect(changed.cursor == stored(id: 7, type: .deleted, millis: 1_800_000_000_000).cursor)
        changed = base
        changed.committedAt = Date(timeIntervalSince1970: 1_800_000_000.001)
        #expect(changed.cursor == stored(id: 7, millis: 1_800_000_000_001).cursor)
        changed = base
        changed.salt = 99
        var salted = base
        salted = StoredEvent(id: salted.id, event: salted.event, committedAt: salted.committedAt, salt: 99)
        #expect(changed.cursor == salted.cursor && changed.cursor != base.cursor)
        #expect(changed == salted, "equal events, equal in every stored field")
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

    /// Clients keep cursors across server upgrades: the fingerprint is FNV-1a over the text
    /// `id|type|order|millis`, whatever the code computing it looks like.
    @Test func theFingerprintIsFNV1aOfTheDocumentedText() {
        func reference(_ id: Int64, _ type: OrderEventType, _ order: Int64, _ millis: Int64) -> String {
            var hash: UInt32 = 0x811c_9dc5
            for byte in "\(id)|\(type.rawValue)|\(order)|\(millis)".utf8 {
                hash ^= UInt32(byte)
                hash = hash &* 0x0100_0193
            }
            let hex = String(hash, radix: 16)
            return String(repeating: "0", count: 8 - hex.count) + hex
        }
        let ids: [Int64] = [0, 1, 9, 10, 99, 100, 1234, 999_999, 1_000_000_007, Int64.max]
        let times: [Int64] = [0, 1, -1, -1_500, 999, 1_000, 1_800_000_000_123, 4_102_444_800_000]
        var checked = 0
        for id in ids {
            for type in OrderEventType.allCases {
                for millis in times {
                    let event = stored(id: EventID(id), order: OrderID(id / 3 + 1), type: type, millis: millis)
                    #expect(event.cursor.check == reference(id, type, id / 3 + 1, millis), "id \(id) \(type) \(millis)")
                    checked += 1
                }
            }
        }
        #expect(checked == ids.count * OrderEventType.allCases.count * times.count)
        // One value pinned by hand, so the reference above cannot drift with the code either.
        // (computed by the string-building code this replaced, 2026-12-02).
        #expect(stored(id: 1234, millis: 1_800_000_000_123).cursor.description == "1234-272a7e52")
    }

    /// With a salt (`StoredEvent.salt`), the check is FNV-1a over `id|type|order|millis|salt`; a salt
    /// of 0 (events stored before it) leaves the check as it was, so clients' cursors stay valid.
    @Test func aSaltedEventsCheckCoversItsSaltAndAnUnsaltedOneKeepsItsOldCheck() {
        let unsalted = stored(id: 1234, millis: 1_800_000_000_123)
        #expect(unsalted.salt == 0)
        #expect(unsalted.cursor.description == "1234-272a7e52", "unchanged")
        var salted = unsalted
        salted.salt = 987_654_321_012_345
        var hash: UInt32 = 0x811c_9dc5
        for byte in "1234|\(unsalted.event.type.rawValue)|\(unsalted.event.orderID.rawValue)|1800000000123|987654321012345".utf8 {
            hash ^= UInt32(byte)
            hash = hash &* 0x0100_0193
        }
        let hex = String(hash, radix: 16)
        #expect(salted.cursor.check == String(repeating: "0", count: 8 - hex.count) + hex)
        #expect(salted.cursor != unsalted.cursor)
        var other = salted
        other.salt += 1
        #expect(other.cursor != salted.cursor, "another salt, another check")
        #expect(StoredEvent.newSalt() > 0)
    }

    /// Salts come from the secure generator 64 at a time: across several refills, from several
    /// threads at once, each is 1…Int64.max and none repeats.
    @Test func saltsArePositiveAndDistinctAcrossRefillsAndThreads() async {
        let salts = await withTaskGroup(of: [Int64].self) { group in
            for _ in 0..<4 { group.addTask { (0..<300).map { _ in StoredEvent.newSalt() } } }
            return await group.reduce(into: []) { $0 += $1 }
        }
        #expect(salts.count == 1_200)
        #expect(salts.allSatisfy { $0 > 0 })
        #expect(Set(salts).count == salts.count)
        // Both halves of the range show up (the high bit of the draw is dropped, not the range).
        #expect(salts.contains { $0 > Int64.max / 2 } && salts.contains { $0 < Int64.max / 2 })
    }
}
