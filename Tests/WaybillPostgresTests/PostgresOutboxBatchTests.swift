import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

/// Events are appended in one statement (arrays through `unnest`): whatever text an order
/// number holds must come back byte for byte, with every group, under dense ids.
@Suite(.timeLimit(.minutes(1))) struct PostgresOutboxBatchTests {
    @Test func eventsWithHostileTextComeBackExactly() async throws {
        let store = try await openStore(try await freshDatabase())
        defer { store.close() }
        let order = try await seedOrder(store)
        let numbers = [
            #"quote " inside"#, #"back\slash"#, "comma, and {braces}", "NULL", "", " spaces ", "ünïcødé 🚚",
            "new\nline", #"\"both\""#,
        ]
        let events = numbers.enumerated().map { index, number in
            OrderEvent(
                type: index.isMultiple(of: 2) ? .updated : .assigned, companyID: order.companyID, orderID: order.id!,
                number: number, oldStatus: index.isMultiple(of: 3) ? nil : .new, newStatus: .assigned,
                driverID: index.isMultiple(of: 2) ? nil : UserID(Int64(index)), oldDriverID: index == 1 ? 7 : nil,
                changedAt: t0.addingTimeInterval(Double(index)),
                groups: [.company(order.companyID), .fleet(order.companyID), .driver(UserID(Int64(index + 1)))])
        }
        let appended = try await store.write { tx in try tx.appendEvents(events) }
        let read = try await store.read { tx in try tx.events(after: .zero, limit: 100) }
        // The seed's own event is not in `appended`: compare the tail.
        #expect(Array(read.suffix(events.count)) == appended)
        #expect(appended.map(\.event.number) == numbers)
        #expect(zip(appended, appended.dropFirst()).allSatisfy { $1.id.rawValue == $0.id.rawValue + 1 }, "dense ids")
        for stored in appended {
            for group in stored.event.groups {
                let byGroup = try await store.read { tx in try tx.events(of: group, after: EventID(stored.id.rawValue - 1), limit: 1) }
                #expect(byGroup.first == stored, "reachable through \(group.name)")
            }
            #expect(try await store.read { tx in try tx.event(stored.id) }?.cursor == stored.cursor)
        }
    }
}
