import Foundation
import Testing
import WaybillAPI

/// Each row of SPEC §2, end to end over HTTP.
@Suite(.timeLimit(.minutes(1)))
struct OrdersAPITests {
    @Test func dispatcherRunsTheWholeLifeCycle() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let boss = seed.dispatcherToken, driver = seed.drivers[0]
            let created = try await server.request("POST", "/api/orders/", token: boss, json: [
                "title": "Pallets to Harbour", "notes": "fragile",
                "stages": [["kind": "pickup", "address": "Depot 1", "planned_at": "2026-12-01T08:00:00Z"],
                           ["kind": "delivery", "address": "Harbour 7"]],
            ])
            #expect(created.status == 201)
            let order = created.object
            let id = try #require(order.int("id"))
            #expect(order.string("status") == "new")
            #expect(order["driver_id"] is NSNull)
            #expect(order.int("version") == 1)
            let number = try #require(order.string("number"))
            #expect(number.range(of: #"^\d{4}/\d{2}/\d{4,}$"#, options: .regularExpression) != nil)
            let stages = try #require(order["stages"] as? [[String: Any]])
            #expect(stages.map { $0.string("kind") } == ["pickup", "delivery"])
            #expect(stages[0].string("planned_at") == "2026-12-01T08:00:00.000Z")

            let patched = try await server.request("PATCH", "/api/orders/\(id)/", token: boss, json: ["title": "Pallets (2)"])
            #expect(patched.status == 200)
            #expect(patched.object.string("title") == "Pallets (2)")
            #expect(patched.object.int("version") == 2)

            let assigned = try await server.request("POST", "/api/orders/\(id)/assign", token: boss, json: ["driver_id": driver.id])
            #expect(assigned.object.string("status") == "assigned")
            #expect(assigned.object.int("driver_id") == driver.id)

            for next in ["accepted", "in_progress"] {
                let moved = try await server.request("POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": next])
                #expect(moved.status == 200)
                #expect(moved.object.string("status") == next)
            }
            let stageID = try #require(stages[0].int("id"))
            let stage = try await server.request("POST", "/api/orders/\(id)/stages/\(stageID)/complete", token: driver.token)
            #expect(stage.status == 200)
            let done = try #require((stage.object["stages"] as? [[String: Any]])?.first)
            #expect(done.string("completed_at") != nil)
            let again = try await server.request("POST", "/api/orders/\(id)/stages/\(stageID)/complete", token: driver.token)
            #expect(again.status == 409)

            let document = try await server.request(
                "POST", "/api/orders/\(id)/documents", token: driver.token, json: ["name": "POD.pdf", "kind": "proof_of_delivery"])
            #expect(document.status == 201)
            let documents = try #require(document.object["documents"] as? [[String: Any]])
            #expect(documents.first?.string("name") == "POD.pdf")
            #expect(documents.first?.int("id") != nil)

            let completed = try await server.request("POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "completed"])
            #expect(completed.object.string("status") == "completed")
            let cancel = try await server.request("POST", "/api/orders/\(id)/status", token: boss, json: ["status": "cancelled"])
            #expect(cancel.status == 409)
            #expect(cancel.errorCode == "invalid_transition")

            let detail = try await server.request("GET", "/api/orders/\(id)/", token: boss)
            #expect(detail.status == 200)
            #expect(detail.object.string("notes") == "fragile")
            #expect(detail.object.int("version") == 8)

            #expect(try await server.request("DELETE", "/api/orders/\(id)/", token: boss).status == 204)
            #expect(try await server.request("GET", "/api/orders/\(id)/", token: boss).status == 404)
        }
    }

    /// A client that sends the stages back as it got them changes no time: the times read back as
    /// the same instants. Once, a date before 1582 moved 10 days per round trip, and a finished
    /// order refused its own stages sent back with 409 (its route looked changed).
    @Test func stagesSentBackUnchangedKeepTheirTimes() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let boss = seed.dispatcherToken, driver = seed.drivers[0]
            let times = ["1500-06-01T00:00:00.000Z", "1970-01-01T00:00:01.001Z", "2048-03-01T12:30:45.067Z"]
            let created = try await server.request("POST", "/api/orders/", token: boss, json: [
                "title": "Old maps", "driver_id": driver.id,
                "stages": times.map { ["kind": "stop", "address": "Somewhere", "planned_at": $0] },
            ])
            #expect(created.status == 201)
            let id = try #require(created.object.int("id"))
            var stages = try #require(created.object["stages"] as? [[String: Any]])
            #expect(stages.map { $0.string("planned_at") } == times)
            for round in 0..<3 {
                if round == 2 {
                    for next in ["accepted", "in_progress", "completed"] {
                        let moved = try await server.request(
                            "POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": next])
                        #expect(moved.status == 200)
                    }
                }
                let sentBack = stages.map { stage in
                    ["id": stage["id"] as Any, "kind": stage["kind"] as Any, "address": stage["address"] as Any,
                     "planned_at": stage["planned_at"] as Any]
                }
                let patched = try await server.request("PATCH", "/api/orders/\(id)/", token: boss, json: ["stages": sentBack])
                #expect(patched.status == 200, "round \(round)")
                stages = try #require(patched.object["stages"] as? [[String: Any]])
                #expect(stages.map { $0.string("planned_at") } == times)
            }
        }
    }

    @Test func createWithDriverAssignsAtOnceAndNumbersCount() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let first = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken, json: ["title": "A", "driver_id": seed.drivers[0].id])
            let second = try await server.request("POST", "/api/orders/", token: seed.dispatcherToken, json: ["title": "B"])
            #expect(first.object.string("status") == "assigned")
            #expect(first.object.int("driver_id") == seed.drivers[0].id)
            let n1 = try #require(first.object.string("number")), n2 = try #require(second.object.string("number"))
            #expect(n1.hasSuffix("/0001") && n2.hasSuffix("/0002"))
        }
    }

    /// A create's stages are all new: ids in its body are not kept (a new order has no stages to
    /// keep), so ids repeated there are no reason to refuse it (they were: 422; a review, 2026-12-07).
    @Test func aCreateIgnoresTheStageIdsItIsGiven() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let created = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: [
                    "title": "T",
                    "stages": [["id": 1, "kind": "pickup", "address": "a"], ["id": 1, "kind": "delivery", "address": "b"]],
                ])
            #expect(created.status == 201)
            let stages = try #require(created.object["stages"] as? [[String: Any]])
            #expect(stages.map { $0["address"] as? String } == ["a", "b"])
            let ids = stages.compactMap { $0["id"] as? Int }
            #expect(ids.count == 2 && Set(ids).count == 2, "two new stages: \(ids)")
        }
    }

    @Test func unassignReturnsTheOrderToNew() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let unassigned = try await server.request("POST", "/api/orders/\(id)/unassign", token: seed.dispatcherToken)
            #expect(unassigned.status == 200)
            #expect(unassigned.object.string("status") == "new")
            #expect(unassigned.object["driver_id"] is NSNull)
            let twice = try await server.request("POST", "/api/orders/\(id)/unassign", token: seed.dispatcherToken)
            #expect(twice.status == 409)
        }
    }

    @Test func listIsScopedByRoleAndFilteredByStatus() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 2)
            let all = try await server.request("GET", "/api/orders/", token: seed.dispatcherToken)
            #expect(all.array.count == 4)
            #expect(all.array.allSatisfy { $0["stages"] == nil && $0["documents"] == nil })
            let mine = try await server.request("GET", "/api/orders/", token: seed.drivers[0].token)
            #expect(Set(mine.array.compactMap { $0.int("id") }) == Set(seed.drivers[0].orderIDs ?? []))
            let first = try #require(seed.drivers[0].orderIDs?.first)
            _ = try await server.request("POST", "/api/orders/\(first)/status", token: seed.drivers[0].token, json: ["status": "accepted"])
            let accepted = try await server.request("GET", "/api/orders/?status=accepted", token: seed.dispatcherToken)
            #expect(accepted.array.compactMap { $0.int("id") } == [first])
            let bad = try await server.request("GET", "/api/orders/?status=flying", token: seed.dispatcherToken)
            #expect(bad.status == 400)
        }
    }

    @Test func etagGives304UntilTheDataChanges() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let token = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            for path in ["/api/orders/", "/api/orders/\(id)/"] {
                let first = try await server.request("GET", path, token: token)
                let tag = try #require(first.headers["etag"])
                let same = try await server.request("GET", path, token: token, headers: ["If-None-Match": tag])
                #expect(same.status == 304)
                #expect(same.body.isEmpty)
                _ = try await server.request("PATCH", "/api/orders/\(id)/", token: token, json: ["notes": UUID().uuidString])
                let changed = try await server.request("GET", path, token: token, headers: ["If-None-Match": tag])
                #expect(changed.status == 200)
                #expect(changed.headers["etag"] != tag)
            }
        }
    }

    @Test func driversListIsForDispatchers() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let drivers = try await server.request("GET", "/api/drivers/", token: seed.dispatcherToken)
            #expect(drivers.array.compactMap { $0.int("id") } == seed.drivers.map(\.id))
            #expect(try await server.request("GET", "/api/drivers/", token: seed.drivers[0].token).status == 403)
        }
    }

    @Test func healthReadinessAndMetricsAnswer() async throws {
        try await TestServer.withRunning { server in
            #expect(try await server.request("GET", "/healthz").status == 200)
            #expect(try await server.request("GET", "/readyz").status == 200)
            _ = try await server.request("GET", "/api/orders/")
            let metrics = try await server.request("GET", "/metrics")
            #expect(metrics.status == 200)
            #expect(metrics.text.contains(#"waybill_http_requests_total{route="/api/orders",status="401"} 1"#))
            #expect(metrics.text.contains("waybill_outbox_lag_seconds"))
            #expect(metrics.text.contains("waybill_websockets_open"))
        }
    }
}
