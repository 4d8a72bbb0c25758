import Foundation
import Testing
import WaybillAPI

/// Company B cannot see, change or learn the existence of company A's orders; a driver sees only
/// their own. Every refusal is the same 404 a missing order gets.
@Suite(.timeLimit(.minutes(1)))
struct IsolationTests {
    @Test func anotherCompanyGets404ForEverything() async throws {
        try await TestServer.withRunning { server in
            let a = try await server.seed(drivers: 1, orders: 1, company: "A")
            let b = try await server.seed(drivers: 1, orders: 0, company: "B")
            let id = try #require(a.drivers[0].orderIDs?.first)
            let missing = try await server.request("GET", "/api/orders/999999/", token: b.dispatcherToken)
            let attempts: [(String, String, [String: Any]?)] = [
                ("GET", "/api/orders/\(id)/", nil),
                ("PATCH", "/api/orders/\(id)/", ["title": "stolen"]),
                ("POST", "/api/orders/\(id)/status", ["status": "cancelled"]),
                ("POST", "/api/orders/\(id)/assign", ["driver_id": b.drivers[0].id]),
                ("POST", "/api/orders/\(id)/unassign", nil),
                ("POST", "/api/orders/\(id)/documents", ["name": "x", "kind": "y"]),
                ("DELETE", "/api/orders/\(id)/", nil),
            ]
            for (method, path, json) in attempts {
                let answer = try await server.request(method, path, token: b.dispatcherToken, json: json)
                #expect(answer.status == 404, "\(method) \(path)")
                #expect(answer.body == missing.body, "same body as a missing order: \(method) \(path)")
            }
            #expect(try await server.request("GET", "/api/orders/", token: b.dispatcherToken).array.isEmpty)
            let still = try await server.request("GET", "/api/orders/\(id)/", token: a.dispatcherToken)
            #expect(still.object.string("title") != "stolen")
            #expect(still.object.string("status") == "assigned")
        }
    }

    @Test func dispatcherCannotAssignAnotherCompanysDriver() async throws {
        try await TestServer.withRunning { server in
            let a = try await server.seed(drivers: 0, orders: 0, company: "A")
            let b = try await server.seed(drivers: 1, orders: 0, company: "B")
            let created = try await server.request("POST", "/api/orders/", token: a.dispatcherToken, json: ["title": "x"])
            let id = try #require(created.object.int("id"))
            let assign = try await server.request("POST", "/api/orders/\(id)/assign", token: a.dispatcherToken, json: ["driver_id": b.drivers[0].id])
            #expect(assign.status == 422)
            let create = try await server.request(
                "POST", "/api/orders/", token: a.dispatcherToken, json: ["title": "y", "driver_id": b.drivers[0].id])
            #expect(create.status == 422)
        }
    }

    @Test func driverSeesAndMovesOnlyTheirOwnOrders() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 1)
            let mine = try #require(seed.drivers[0].orderIDs?.first), theirs = try #require(seed.drivers[1].orderIDs?.first)
            let me = seed.drivers[0].token
            #expect(try await server.request("GET", "/api/orders/\(mine)/", token: me).status == 200)
            #expect(try await server.request("GET", "/api/orders/\(theirs)/", token: me).status == 404)
            #expect(try await server.request("POST", "/api/orders/\(theirs)/status", token: me, json: ["status": "accepted"]).status == 404)
            #expect(try await server.request("POST", "/api/orders/\(theirs)/documents", token: me, json: ["name": "a", "kind": "b"]).status == 404)
        }
    }

    @Test func driversCannotUseDispatcherRoutes() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first), me = seed.drivers[0].token
            #expect(try await server.request("POST", "/api/orders/", token: me, json: ["title": "x"]).status == 403)
            #expect(try await server.request("PATCH", "/api/orders/\(id)/", token: me, json: ["title": "x"]).status == 403)
            #expect(try await server.request("POST", "/api/orders/\(id)/assign", token: me, json: ["driver_id": 1]).status == 403)
            #expect(try await server.request("POST", "/api/orders/\(id)/unassign", token: me).status == 403)
            #expect(try await server.request("DELETE", "/api/orders/\(id)/", token: me).status == 403)
            let cancel = try await server.request("POST", "/api/orders/\(id)/status", token: me, json: ["status": "cancelled"])
            #expect(cancel.status == 403)
        }
    }
}
