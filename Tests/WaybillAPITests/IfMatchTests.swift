import Foundation
import Testing
import WaybillDomain
import WaybillSQLite
import WaybillStorage

@testable import WaybillAPI

/// Lost-update protection (SPEC §2): `If-Match` on every write to an existing order.
@Suite(.timeLimit(.minutes(1)))
struct IfMatchTests {
    /// One write route, as a client calls it.
    struct Write: CustomStringConvertible {
        var method: String
        var path: String
        var asDriver: Bool
        var json: [String: Any]?
        var success: Int
        var description: String { "\(method) \(path)" }
    }

    /// The writes in an order that each one is allowed after the one before (assigned order, one stage).
    static func writes(order id: Int64, stage: Int64, driver: Int64) -> [Write] {
        [
            Write(
                method: "PATCH", path: "/api/orders/\(id)/", asDriver: false, json: ["title": "Edited"], success: 200),
            Write(
                method: "POST", path: "/api/orders/\(id)/documents", asDriver: true,
                json: ["name": "POD.pdf", "kind": "proof_of_delivery"], success: 201),
            Write(
                method: "POST", path: "/api/orders/\(id)/stages/\(stage)/complete", asDriver: true, json: nil,
                success: 200),
            Write(method: "POST", path: "/api/orders/\(id)/unassign", asDriver: false, json: nil, success: 200),
            Write(
                method: "POST", path: "/api/orders/\(id)/assign", asDriver: false, json: ["driver_id": driver],
                success: 200),
            Write(
                method: "POST", path: "/api/orders/\(id)/status", asDriver: true, json: ["status": "accepted"],
                success: 200),
            Write(method: "DELETE", path: "/api/orders/\(id)/", asDriver: false, json: nil, success: 204),
        ]
    }

    /// Whether `tag` is order `id`'s ETag at `version`: `"o<id>-v<version>-h<8 hex>"`, with
    /// `-s<seen>` when a receipt counts.
    static func isOrderTag(_ tag: String?, id: Int64, version: Int64, seen: Int64? = nil) -> Bool {
        guard let tag, tag.hasPrefix("\"o\(id)-v\(version)-h"), tag.hasSuffix("\"") else { return false }
        let rest = tag.dropFirst("\"o\(id)-v\(version)-h".count).dropLast()
        let check = rest.prefix(8), receipt = rest.dropFirst(8)
        guard check.count == 8, check.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else { return false }
        return seen.map { receipt == "-s\($0)" } ?? receipt.isEmpty
    }

    /// After a restore or a failover that lost commits, the same version comes back with other
    /// content: its ETag differs (the check), so an `If-Match` for the version the client saw is
    /// refused, while a tag built from the version alone (`"o42-v7"`) still matches by version.
    @Test func aTagFromAnotherHistoryIsRefusedAndABareVersionStillMatches() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let seen = try await server.request("GET", "/api/orders/\(id)/", token: boss)
            let tag = try #require(seen.headers["etag"]), version = try #require(seen.object.int("version"))
            #expect(Self.isOrderTag(tag, id: id, version: version))
            // The other history: the same version number, other content, written later.
            try await server.store.write { tx in
                var other = try #require(try tx.order(OrderID(id), in: CompanyID(seed.companyID)))
                other.notes = "another history"
                other.updatedAt = other.updatedAt.addingTimeInterval(60)
                _ = try tx.updateOrder(other)
            }
            let now = try await server.request("GET", "/api/orders/\(id)/", token: boss)
            #expect(now.object.int("version") == version)
            #expect(now.headers["etag"] != tag)
            let refused = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "x"], headers: ["If-Match": tag])
            #expect(refused.status == 412)
            let bare = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "x"], headers: ["If-Match": "\"o\(id)-v\(version)\""])
            #expect(bare.status == 200)
        }
    }

    /// A restore brings the id counter back with the data, so the next order created takes the id
    /// of an order the restore took away. `If-Order-Created` names the order a client acted on by its
    /// `created_at` (milliseconds): a write with it applies to that order at any version, alone or
    /// with `If-Match`, and is refused (412) for the order that took the id, which stays unchanged.
    /// A value that is not a whole number of milliseconds is 400, like a malformed `If-Match`.
    @Test func ifOrderCreatedNeverMatchesAnOrderThatTookTheIdAfterARestore() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let boss = seed.dispatcherToken
            func createdMilliseconds(_ answer: TestResponse) throws -> Int64 {
                let text = try #require(answer.object.string("created_at"))
                return try #require(Timestamp.parse(text)).epochMilliseconds
            }
            let backup = try await server.backUp()
            let stages: [[String: Any]] = [["kind": "stop", "address": "Depot"]]
            let lost = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "Lost", "stages": stages])
            let id = try #require(lost.object.int("id")), lostCreated = String(try createdMilliseconds(lost))
            for (notes, headers) in [("v2", ["If-Order-Created": lostCreated]), ("v3", ["If-Order-Created": " \(lostCreated) "])] {
                let applied = try await server.request("PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": notes], headers: headers)
                #expect(applied.status == 200, "\(applied.text)")
            }
            let both = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "v4"],
                headers: ["If-Order-Created": lostCreated, "If-Match": "\"o\(id)-v3\""])
            #expect(both.status == 200)
            let staleVersion = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "x"],
                headers: ["If-Order-Created": lostCreated, "If-Match": "\"o\(id)-v3\""])
            #expect(staleVersion.status == 412)
            let blank = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "v4"], headers: ["If-Order-Created": "  "])
            #expect(blank.status == 200, "a blank value is no precondition")
            for bad in ["soon", "1.5", "+12", "1234567890123456789", "12 34", "-"] {
                let malformed = try await server.request(
                    "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "x"], headers: ["If-Order-Created": bad])
                #expect(malformed.status == 400, "\(bad)")
                #expect(malformed.errorCode == "invalid_header")
            }

            await server.stopServer()
            try await server.restoreData(from: backup)
            try await server.startServer()
            let reused = try await server.request("POST", "/api/orders/", token: boss, json: ["title": "Reused", "stages": stages])
            #expect(reused.object.int("id") == id, "the restored counter gives the id again")
            let reusedCreated = String(try createdMilliseconds(reused))
            #expect(reusedCreated != lostCreated)
            for headers in [["If-Order-Created": lostCreated], ["If-Order-Created": lostCreated, "If-Match": "\"o\(id)-v1\""]] {
                let refused = try await server.request(
                    "POST", "/api/orders/\(id)/status", token: boss, json: ["status": "cancelled"], headers: headers)
                #expect(refused.status == 412, "\(headers)")
                #expect(refused.errorCode == "order_replaced")
                #expect((refused.object["message"] as? String)?.contains("not the order you acted on") == true)
            }
            let unchanged = try await server.request("GET", "/api/orders/\(id)/", token: boss)
            #expect(unchanged.object.string("status") == "new")
            #expect(unchanged.object.int("version") == 1)
            let own = try await server.request(
                "DELETE", "/api/orders/\(id)/", token: boss, headers: ["If-Order-Created": reusedCreated])
            #expect(own.status == 204)
        }
    }

    /// After each refused write the same write goes through with `accepted`: a list holding the current
    /// tag, or `*`.
    @Test(arguments: ["list with the current tag", "*"])
    func everyWriteRouteRefusesAStaleTagChangesNothingAndEmitsNoEvent(accepted: String) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let boss = seed.dispatcherToken, driver = seed.drivers[0]
            let (panel, _) = try await server.connectedSocket(token: boss)
            let created = try await server.request(
                "POST", "/api/orders/", token: boss,
                json: [
                    "title": "Original", "driver_id": driver.id, "stages": [["kind": "pickup", "address": "Depot"]],
                ])
            #expect(created.status == 201)
            let id = try #require(created.object.int("id"))
            let stage = try #require((created.object["stages"] as? [[String: Any]])?.first?.int("id"))
            var tag = try #require(created.headers["etag"])
            #expect(Self.isOrderTag(tag, id: id, version: 1), "\(tag)")
            // The socket opened before the create: its event is read now, so each one below is a write's.
            #expect(try #require(await panel.nextEvent())["type"] as? String == "order_created")

            for write in Self.writes(order: id, stage: stage, driver: driver.id) {
                let token = write.asDriver ? driver.token : boss
                let before = try await server.request("GET", "/api/orders/\(id)/", token: boss)
                let version = try #require(before.object.int("version"))
                let stale = "\"o\(id)-v\(version - 1)\""

                let refused = try await server.request(
                    write.method, write.path, token: token, json: write.json, headers: ["If-Match": stale])
                #expect(refused.status == 412, "\(write)")
                #expect(refused.errorCode == "precondition_failed", "\(write)")
                #expect((refused.object["message"] as? String)?.isEmpty == false)
                let after = try await server.request("GET", "/api/orders/\(id)/", token: boss)
                #expect(after.body == before.body, "\(write) changed the order")

                let applied = try await server.request(
                    write.method, write.path, token: token, json: write.json,
                    headers: ["If-Match": accepted == "*" ? "*" : "\"o\(id)-v0\", " + tag])
                #expect(applied.status == write.success, "\(write): \(applied.text)")
                // Events arrive in commit order: the first one after the refusal is this write's, so
                // the refused write emitted none.
                let event = try #require(await panel.nextEvent())
                #expect(event["event_id"] as? Int != nil)
                let expectedType = write.method == "DELETE" ? "order_deleted" : nil
                if let expectedType { #expect(event["type"] as? String == expectedType) }
                #expect(event["order_id"] as? Int == Int(id))
                if write.method != "DELETE" {
                    let newTag = try #require(applied.headers["etag"], "\(write) answered without ETag")
                    #expect(Self.isOrderTag(newTag, id: id, version: applied.object.int("version") ?? 0), "\(newTag)")
                    #expect(newTag != tag)
                    tag = newTag
                }
            }
            // Nothing else was emitted: the socket stays quiet.
            #expect(await panel.nextEvent(timeout: .milliseconds(300)) == nil)
        }
    }

    @Test func starMatchesAnyExistingOrderAndAMissingOrderIsStill404() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let star = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "any version"], headers: ["If-Match": "*"])
            #expect(star.status == 200)
            #expect(star.object.string("notes") == "any version")
            for ifMatch in ["*", "\"o999999-v1\""] {
                let missing = try await server.request(
                    "PATCH", "/api/orders/999999/", token: boss, json: ["notes": "x"], headers: ["If-Match": ifMatch])
                #expect(missing.status == 404)
                let deleted = try await server.request(
                    "DELETE", "/api/orders/999999/", token: boss, headers: ["If-Match": ifMatch])
                #expect(deleted.status == 404)
            }
            // Another driver's order: 404 as without If-Match, never 412 (existence never leaks); so with
            // an `If-Order-Created` that does not match it either.
            let other = try await server.seed(drivers: 1, orders: 0, company: "Other")
            for headers in [["If-Match": "\"o\(id)-v0\""], ["If-Order-Created": "1"]] {
                let foreign = try await server.request(
                    "POST", "/api/orders/\(id)/status", token: other.drivers[0].token, json: ["status": "accepted"],
                    headers: headers)
                #expect(foreign.status == 404, "\(headers)")
            }
        }
    }

    /// The body is judged after visibility and `If-Match` (DESIGN.md, "Lost updates"): an invalid
    /// body for a missing order is 404, and for a stale version 412, not 422.
    @Test func anInvalidBodyIsJudgedAfterTheOrderAndItsVersion() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let missing = try await server.request("PATCH", "/api/orders/999999/", token: boss, json: ["title": "  "])
            #expect(missing.status == 404)
            let stale = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["title": ""], headers: ["If-Match": "\"o\(id)-v0\""])
            #expect(stale.status == 412)
            let noDocument = try await server.request(
                "POST", "/api/orders/999999/documents", token: boss, json: ["name": "", "kind": "x"])
            #expect(noDocument.status == 404)
            let invalid = try await server.request("PATCH", "/api/orders/\(id)/", token: boss, json: ["title": "  "])
            #expect(invalid.status == 422, "on the order as it is, the body's problem is the answer")
        }
    }

    @Test func aWeakOrMalformedTagIsNeverAMatch() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let tag = try #require(try await server.request("GET", "/api/orders/\(id)/", token: boss).headers["etag"])
            let weak = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "weak"], headers: ["If-Match": "W/" + tag])
            #expect(weak.status == 412)
            for malformed in ["o\(id)-v1", "\"o\(id)-v1", "\"a\" \"b\"", ",", "**"] {
                let bad = try await server.request(
                    "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "bad"], headers: ["If-Match": malformed]
                )
                #expect(bad.status == 400, "If-Match: \(malformed)")
                #expect(bad.errorCode == "invalid_header")
            }
            let detail = try await server.request("GET", "/api/orders/\(id)/", token: boss)
            #expect(detail.object.int("version") == 1)
        }
    }

    /// Two writers with the same tag: exactly one wins, the other gets 412 (the check is atomic with the write).
    @Test func concurrentWritesWithTheSameTagLetExactlyOneThrough() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let tag = "\"o\(id)-v1\""
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for n in 0..<8 {
                    group.addTask {
                        try await server.request(
                            "PATCH", "/api/orders/\(id)/", token: boss, json: ["notes": "writer \(n)"],
                            headers: ["If-Match": tag]
                        ).status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0 == 200 }.count == 1)
            #expect(statuses.filter { $0 == 412 }.count == 7)
            #expect(try await server.request("GET", "/api/orders/\(id)/", token: boss).object.int("version") == 2)
        }
    }

    // MARK: Plain values

    @Test func ifMatchHeaderParsing() {
        #expect(Conditional.parseIfMatch("*") == .anyExisting)
        #expect(Conditional.parseIfMatch(#""o1-v2""#) == .oneOf([#""o1-v2""#]))
        #expect(Conditional.parseIfMatch(#" "o1-v2" ,W/"o1-v3",  "o1-v4" "#) == .oneOf([#""o1-v2""#, #""o1-v4""#]))
        #expect(Conditional.parseIfMatch(#"W/"o1-v2""#) == .oneOf([]))
        for bad in ["", "o1-v2", #""o1-v2"#, #""a" "b""#, "*, \"a\"", ",", #""a b""#] {
            #expect(Conditional.parseIfMatch(bad) == nil, "\(bad)")
        }
    }

    @Test func preconditionFailedIs412InTheOnePlaceThatMapsErrors() {
        let error = APIError(PreconditionFailed(currentETag: #""o42-v8""#))
        #expect(error.status == 412)
        #expect(error.code == "precondition_failed")
        #expect(error.message.contains(#""o42-v8""#))
    }

    /// The tag is written byte by byte (`Conditional.versionTag`): the same text as its parts put
    /// together, for ids and versions of every length, an order without an id, and one with a receipt.
    @Test func anOrdersTagIsItsIdVersionAndCheck() {
        let at = Date(timeIntervalSince1970: 1_796_000_000.123)
        for (id, version) in [(nil, 1), (1, 0), (7, 9), (42, 10), (1_000, 123_456_789), (Int64.max, Int.max)] as [(Int64?, Int)] {
            let order = Order(
                id: id.map(OrderID.init), companyID: CompanyID(1), number: "N", title: "t", createdAt: at, updatedAt: at,
                version: version)
            let expected = "\"o\(id ?? 0)-v\(version)-h\(order.versionCheck)\""
            #expect(Conditional.versionTag(order) == expected)
            #expect(Conditional.etag(order) == expected)
            var seen = order
            seen.seen = OrderReceipt(driverID: UserID(3), version: 5, at: at)
            #expect(Conditional.etag(seen) == "\"o\(id ?? 0)-v\(version)-h\(order.versionCheck)-s5\"")
        }
    }
}
