import Foundation
import Testing
import WaybillAPI

/// For each write kind the right groups get the right event type, and no other socket gets anything.
@Suite(.timeLimit(.minutes(1)))
struct EventRoutingTests {
    @Test func eachWriteReachesExactlyItsGroups() async throws {
        try await TestServer.withRunning { server in
            let a = try await server.seed(drivers: 3, orders: 0, company: "A")
            let b = try await server.seed(drivers: 1, orders: 0, company: "B")
            let boss = a.dispatcherToken
            let (driverA, driverB, bystander) = (a.drivers[0], a.drivers[1], a.drivers[2])
            let (panel, _) = try await server.connectedSocket(token: boss)
            let (fleet, _) = try await server.connectedSocket(token: boss, query: "stream=fleet")
            let (socketA, _) = try await server.connectedSocket(token: driverA.token)
            let (socketB, _) = try await server.connectedSocket(token: driverB.token)
            let (other, _) = try await server.connectedSocket(token: bystander.token)
            let (foreignDriver, _) = try await server.connectedSocket(token: b.drivers[0].token)
            let (foreignPanel, _) = try await server.connectedSocket(token: b.dispatcherToken)

            let created = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "t", "driver_id": driverA.id, "stages": [["kind": "stop", "address": "x"]]])
            let id = try #require(created.object.int("id"))
            let stage = try #require((created.object["stages"] as? [[String: Any]])?.first?.int("id"))
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "n"])
            _ = try await server.request("POST", "/api/orders/\(id)/status", token: driverA.token, json: ["status": "accepted"])
            _ = try await server.request("POST", "/api/orders/\(id)/stages/\(stage)/complete", token: driverA.token)
            _ = try await server.request("POST", "/api/orders/\(id)/documents", token: driverA.token, json: ["name": "d", "kind": "k"])
            let second = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "u"])
            let id2 = try #require(second.object.int("id"))
            _ = try await server.request("POST", "/api/orders/\(id2)/assign", token: boss, json: ["driver_id": driverA.id])
            _ = try await server.request("POST", "/api/orders/\(id2)/assign", token: boss, json: ["driver_id": driverB.id])
            _ = try await server.request("POST", "/api/orders/\(id2)/unassign", token: boss)
            _ = try await server.request("DELETE", "/api/orders/\(id)/", token: boss)
            // A marker that reaches company B's sockets: they must see only it.
            let marker = try await server.request("POST", "/api/orders/", token: b.dispatcherToken, json: ["title": "m", "driver_id": b.drivers[0].id])
            let markerID = try #require(marker.object.int("id"))

            let all: [(String, Int64)] = [
                ("order_created", id), ("order_updated", id), ("order_status_changed", id), ("order_updated", id),
                ("order_updated", id), ("order_created", id2), ("order_assigned", id2), ("order_assigned", id2),
                ("order_unassigned", id2), ("order_deleted", id),
            ]
            #expect(try await Self.events(panel, count: all.count) == all)
            #expect(try await Self.events(fleet, count: all.count) == all)
            let forA: [(String, Int64)] = [
                ("order_created", id), ("order_updated", id), ("order_status_changed", id), ("order_updated", id),
                ("order_updated", id), ("order_assigned", id2), ("order_unassigned", id2), ("order_deleted", id),
            ]
            #expect(try await Self.events(socketA, count: forA.count) == forA)
            #expect(try await Self.events(socketB, count: 2) == [("order_assigned", id2), ("order_unassigned", id2)])
            #expect(try await Self.events(foreignDriver, count: 1) == [("order_created", markerID)])
            #expect(try await Self.events(foreignPanel, count: 1) == [("order_created", markerID)])
            // Nothing else arrives anywhere; the bystander driver of company A got nothing at all.
            for socket in [panel, fleet, socketA, socketB, other, foreignDriver, foreignPanel] {
                #expect(await socket.nextEvent(timeout: .milliseconds(300)) == nil)
            }
        }
    }

    /// SPEC §3: a frame sent to a driver carries nothing about other drivers.
    @Test func reassignmentFramesToDriversNameNoOtherDriver() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let (a, b) = (seed.drivers[0], seed.drivers[1])
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (socketA, _) = try await server.connectedSocket(token: a.token)
            let (socketB, _) = try await server.connectedSocket(token: b.token)
            let created = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken, json: ["title": "t", "driver_id": a.id])
            let id = try #require(created.object.int("id"))
            #expect(await socketA.nextEvent()?["type"] as? String == "order_created")
            let moved = try await server.request("POST", "/api/orders/\(id)/assign", token: seed.dispatcherToken, json: ["driver_id": b.id])
            #expect(moved.status == 200)

            let toA = try #require(await socketA.nextEvent())
            #expect(toA["type"] as? String == "order_unassigned")
            #expect(toA["driver_id"] is NSNull, "the old driver must not learn who took the order")
            #expect(toA.int("old_driver_id") == a.id)
            let toB = try #require(await socketB.nextEvent())
            #expect(toB["type"] as? String == "order_assigned")
            #expect(toB.int("driver_id") == b.id)
            #expect(toB["old_driver_id"] is NSNull, "the new driver must not learn who had the order")
            // The panel still sees the whole move.
            #expect(await panel.nextEvent()?["type"] as? String == "order_created")
            let toPanel = try #require(await panel.nextEvent())
            #expect(toPanel["type"] as? String == "order_assigned")
            #expect(toPanel.int("driver_id") == b.id && toPanel.int("old_driver_id") == a.id)
            for socket in [panel, socketA, socketB] { #expect(await socket.nextEvent(timeout: .milliseconds(300)) == nil) }
        }
    }

    @Test func eventFrameCarriesEveryField() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (socket, connected) = try await server.connectedSocket(token: driver.token)
            #expect(connected["user_id"] as? Int == Int(driver.id))
            #expect(connected["groups"] as? [String] == ["driver_\(driver.id)"])
            let before = try #require(connected["event_id"] as? Int)
            let moved = try await server.request("POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "accepted"])
            let frame = try #require(await socket.nextEvent())
            #expect(frame["type"] as? String == "order_status_changed")
            #expect(frame["id"] as? Int == Int(id) && frame["order_id"] as? Int == Int(id))
            #expect(frame["number"] as? String == moved.object.string("number"))
            #expect(frame["old_status"] as? String == "assigned" && frame["new_status"] as? String == "accepted")
            #expect(frame["driver_id"] as? Int == Int(driver.id))
            let changedAt = try #require(frame["changed_at"] as? String)
            #expect(changedAt.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil)
            #expect((frame["event_id"] as? Int ?? 0) > before)
        }
    }

    @Test func pingGetsPongAndGarbageIsIgnored() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let (socket, _) = try await server.connectedSocket(token: seed.drivers[0].token)
            await socket.send("not json {")
            await socket.send(#"{"type":"subscribe","group":"company_\#(seed.companyID)"}"#)
            await socket.send(#"{"type":"ping"}"#)
            #expect(await socket.next()?["type"] as? String == "pong")
            // The subscribe changed nothing: an order for nobody (company and fleet only) does not
            // reach the driver's socket.
            let created = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: ["title": "For the company only", "stages": [["kind": "stop", "address": "x"]]])
            #expect(created.status == 201)
            #expect(await socket.nextEvent(timeout: .milliseconds(500)) == nil)
        }
    }

    static func events(_ socket: TestSocket, count: Int) async throws -> [(String, Int64)] {
        var out: [(String, Int64)] = []
        for _ in 0..<count {
            guard let frame = await socket.nextEvent() else { break }
            out.append((frame["type"] as? String ?? "?", Int64(frame["order_id"] as? Int ?? 0)))
        }
        return out
    }
}

func == (lhs: [(String, Int64)], rhs: [(String, Int64)]) -> Bool {
    lhs.count == rhs.count && zip(lhs, rhs).allSatisfy { $0 == $1 }
}
