import Foundation
import Testing
import WaybillAPI
import WaybillClient
import WaybillClientTransports

/// `Seeder.Plan.finishedPerDriver` (`waybill seed --finished-per-driver`): a company's past, and
/// that neither the panel's default view nor a driver's phone has to download it.
@Suite(.timeLimit(.minutes(1)))
struct SeedHistoryTests {
    @Test func finishedHistoryIsOlderThanTheActiveOrdersAndStaysOutOfTheDefaultViews() async throws {
        try await TestServer.withRunning { server in
            let seed = try await Seeder(store: server.store, passwordIterations: 1_000).seed(
                .init(companyName: "Past", drivers: 3, ordersPerDriver: 2, finishedPerDriver: 700))
            let boss = seed.dispatcherToken
            let counts = try await server.request("GET", "/api/orders/counts", token: boss).object
            #expect((counts.int("completed") ?? 0) + (counts.int("cancelled") ?? 0) == 2_100)
            #expect((counts.int("cancelled") ?? 0) > 0)
            #expect(counts.int("assigned") == 6)

            // The panel's default view: the active orders only, newest first, and they are the newest ids.
            let active = try await server.request("GET", "/api/orders/?active=true", token: boss)
            let activeIDs = active.array.compactMap { $0.int("id") }
            #expect(activeIDs == seed.drivers.flatMap { $0.orderIDs ?? [] }.sorted(by: >))
            let history = try await server.request("GET", "/api/orders/?status=completed&limit=500", token: boss)
            #expect(history.array.count == 500 && history.headers["link"] != nil)
            #expect(history.array.compactMap { $0.int("id") }.allSatisfy { $0 < (activeIDs.min() ?? 0) })
            // Spread over past months: none updated within the last day.
            let stamp = ISO8601DateFormatter().string(from: Date().addingTimeInterval(-86_400))
            let recent = try await server.request(
                "GET", "/api/orders/?status=completed&status=cancelled&updated_after=\(stamp)", token: boss)
            #expect(recent.status == 200 && recent.array.isEmpty)

            // A driver's phone lists what is active plus what was finished today, not the past.
            let driver = seed.drivers[0]
            let api = HTTPOrdersAPI(
                server: URL(string: server.baseURL)!, token: AccessToken(driver.token), transport: SocketHTTPTransport())
            guard case .modified(let rows, _) = try await api.orders(ifNoneMatch: nil) else {
                Issue.record("no list")
                return
            }
            #expect(rows.map(\.id.rawValue) == (driver.orderIDs ?? []).sorted(by: >))
            let finishedNow = try #require(driver.orderIDs?.first)
            for status in ["accepted", "in_progress", "completed"] {
                _ = try await server.request("POST", "/api/orders/\(finishedNow)/status", token: driver.token, json: ["status": status])
            }
            guard case .modified(let later, _) = try await api.orders(ifNoneMatch: nil) else {
                Issue.record("no list")
                return
            }
            #expect(later.map(\.id.rawValue) == (driver.orderIDs ?? []).sorted(by: >))
            #expect(later.first { $0.id.rawValue == finishedNow }?.status == .completed)
        }
    }

    /// A seed that fails on its people (here: emails already taken) leaves no company behind: the
    /// company used to commit on its own first, and an interrupted `waybill demo` start left one.
    @Test func aSeedThatFailsLeavesNoEmptyCompany() async throws {
        try await TestServer.withRunning { server in
            let seeder = Seeder(store: server.store, passwordIterations: 1_000)
            let plan = Seeder.Plan(companyName: "First", drivers: 1, ordersPerDriver: 0, emailDomain: "taken.example.com")
            let first = try await seeder.seed(plan)
            await #expect(throws: (any Error).self) { try await seeder.seed(plan) }
            let next = try await seeder.seed(.init(companyName: "Next", drivers: 1, ordersPerDriver: 0))
            #expect(next.companyID == first.companyID + 1, "the failed seed's company was rolled back")
        }
    }
}
