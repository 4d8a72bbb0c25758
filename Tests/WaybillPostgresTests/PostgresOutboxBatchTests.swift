import Foundation
import Testing
import WaybillDomain
@testable import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

/// Events are appended in one statement (arrays through `unnest`): whatever text an order
/// number holds must come back byte for byte, with every group, under dense ids.
@Suite(.timeLimit(.minutes(1))) struct PostgresOutboxBatchTests {
    /// An event to a company and its fleet keeps the fleet's index row on PostgreSQL, through
    /// either append (in the transaction, and with the COMMIT): an older node, still running in a
    /// rolling upgrade, replays the fleet from it (`EventGroupRows`). SQLite leaves it out.
    @Test func anEventToACompanyAndItsFleetKeepsTheFleetsRowForOlderNodes() async throws {
        let url = try await freshDatabase()
        let store = try await openStore(url)
        defer { store.close() }
        let order = try await seedOrder(store)
        var event = createdEvent(order)
        event.groups = [.company(order.companyID), .fleet(order.companyID), .driver(UserID(7))]
        let inTransaction = try await store.write { [event] tx in try tx.appendEvents([event]) }
        let withCommit = try await store.write(appendingEvents: { [event] _ in ((), [event]) }).1
        let ids = (inTransaction + withCommit).map(\.id.rawValue)
        let settings = try PostgresConnectionSettings(url: url, applicationName: "waybill-index-rows")
        let idList = PostgresArray.literal(ids.map { "\($0)" })
        let rows = try await runBlocking {
            let deadline = ContinuousClock.now + .seconds(20)
            let db = try PostgresConnection(settings.forPool, deadline: deadline)
            defer { db.close() }
            let results = try db.executePipeline(
                [
                    PostgresStatement(
                        "SELECT group_name || ':' || event_id FROM event_groups WHERE event_id = ANY($1::bigint[]) ORDER BY 1",
                        [.text(idList)])
                ], deadline: deadline)
            return (0..<results[0].rowCount).map { results[0].text($0, 0) }
        }
        let expected = ids.flatMap { ["company_\(order.companyID):\($0)", "fleet_\(order.companyID):\($0)", "driver_7:\($0)"] }
        #expect(rows == expected.sorted())
        let fleet = try await store.read { tx in try tx.events(of: .fleet(order.companyID), after: .zero, limit: 10) }
        #expect(fleet.suffix(2).map(\.id.rawValue) == ids)
    }

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
