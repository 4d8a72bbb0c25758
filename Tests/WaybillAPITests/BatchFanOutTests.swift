import Foundation
import Testing
import WaybillAPI
import WaybillBroker
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// One broker batch holding many events for several groups (what the relay publishes after a poll,
/// or when commits pile up): the hub splits it by group and looks each socket up once, so this
/// checks that every socket still gets exactly its events, each once, in id order.
@Suite(.timeLimit(.minutes(1)))
struct BatchFanOutTests {
    @Test func aBatchForSeveralGroupsReachesEachSocketInIDOrder() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 3, orders: 0)
            let other = try await server.seed(drivers: 1, orders: 0, company: "Other")
            let company = CompanyID(seed.companyID)
            let (a, b) = (UserID(seed.drivers[0].id), UserID(seed.drivers[1].id))
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (panel2, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (socketA, _) = try await server.connectedSocket(token: seed.drivers[0].token)
            let (socketB, _) = try await server.connectedSocket(token: seed.drivers[1].token)
            let (idle, _) = try await server.connectedSocket(token: seed.drivers[2].token)
            let (foreign, _) = try await server.connectedSocket(token: other.dispatcherToken)
            let order = OrderID(1)  // frames only: the order need not exist

            // 30 events in one transaction, addressed to the panel and, by turns, driver A, B or neither.
            let groups: [[Group]] = (0..<30).map { n in
                switch n % 3 {
                case 0: [.company(company), .driver(a)]
                case 1: [.driver(b), .company(company)]
                default: [.company(company)]
                }
            }
            let events = try await server.store.write { tx in
                try tx.appendEvents(groups.map { groups in
                    OrderEvent(
                        type: .updated, companyID: company, orderID: order, number: "n", oldStatus: nil,
                        newStatus: .new, driverID: nil, changedAt: Date(), groups: groups)
                })
            }
            try #require(events.count == 30)
            try await server.broker.publish(events)  // one batch, as the relay would hand it over

            let ids = events.map(\.id.rawValue)
            #expect(try await Self.eventIDs(panel, count: 30) == ids)
            #expect(try await Self.eventIDs(panel2, count: 30) == ids)
            #expect(try await Self.eventIDs(socketA, count: 10) == stride(from: 0, to: 30, by: 3).map { ids[$0] })
            #expect(try await Self.eventIDs(socketB, count: 10) == stride(from: 1, to: 30, by: 3).map { ids[$0] })
            for socket in [panel, panel2, socketA, socketB, idle, foreign] {
                #expect(await socket.nextEvent(timeout: .milliseconds(300)) == nil)
            }
        }
    }

    static func eventIDs(_ socket: TestSocket, count: Int) async throws -> [Int64] {
        var out: [Int64] = []
        for _ in 0..<count {
            guard let frame = await socket.nextEvent() else { break }
            out.append(Int64(frame["event_id"] as? Int ?? 0))
        }
        return out
    }
}
