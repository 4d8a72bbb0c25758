import Foundation
import Testing
import WaybillAPI
import WaybillTesting

/// How the API answers around its routes, from an audit against SPEC §2 and RFC 9110 (2026-12-05):
/// HEAD, 405, the order of 401 before anything else, and `WWW-Authenticate`.
@Suite(.timeLimit(.minutes(1)))
struct AnswerRulesTests {
    /// HEAD says GET's length (RFC 9110 §9.3.2) and sends no body: every HEAD said length 0.
    @Test func headSaysTheLengthGetWouldSend() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let get = try await server.request("GET", "/api/orders/", token: seed.dispatcherToken)
            #expect(get.status == 200 && !get.body.isEmpty)
            let port = server.port, token = seed.dispatcherToken
            let head = try await runBlocking {
                let connection = try RawConnection(port: port)
                try connection.send(RawConnection.request("HEAD", "/api/orders/", headers: [("Authorization", "Bearer \(token)")]))
                return try connection.readResponse(forHEAD: true)
            }
            #expect(head.status == 200)
            #expect(head.header("content-length") == "\(get.body.count)")
            #expect(head.body.isEmpty)
        }
    }

    /// SPEC §2: 401 for a missing or bad token on every `/api/` call but the login, before the
    /// path's id is read and before a 405; 401s name the scheme (RFC 6750 §3).
    @Test func theTokenIsCheckedFirst() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let malformedID = try await server.request("GET", "/api/orders/abc/")
            #expect(malformedID.status == 401)
            #expect(malformedID.headers["www-authenticate"] == "Bearer")
            let wrongMethod = try await server.request("PUT", "/api/orders/1/")
            #expect(wrongMethod.status == 401)
            // With a token: the 405, each method once and HEAD beside GET.
            let allowed = try await server.request("PUT", "/api/orders/counts", token: seed.dispatcherToken)
            #expect(allowed.status == 405)
            let methods = (allowed.headers["allow"] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(methods.first == "GET" && methods.contains("HEAD"))
            #expect(Set(methods).count == methods.count, "each once: \(methods)")
            // The login needs no token: its 405 comes at once.
            #expect(try await server.request("GET", "/api/auth/login").status == 405)
        }
    }

    /// DESIGN.md's order of checks: what cannot be parsed (400) before the role (403), on every
    /// dispatcher-only write (PATCH, assign and unassign answered a driver's bad JSON with 403).
    @Test func unparseableInputIsRefusedBeforeTheRole() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            for (method, path) in [("PATCH", "/api/orders/\(id)/"), ("POST", "/api/orders/\(id)/assign")] {
                let bad = try await server.request(method, path, token: driver.token, body: Data("{".utf8))
                #expect(bad.status == 400, "\(method) \(path)")
            }
            let badTag = try await server.request(
                "POST", "/api/orders/\(id)/unassign", token: driver.token, json: [String: Any](), headers: ["If-Match": "nope"])
            #expect(badTag.status == 400)
            // Well-formed, the role decides.
            let wellFormed = try await server.request("PATCH", "/api/orders/\(id)/", token: driver.token, json: ["notes": "x"])
            #expect(wellFormed.status == 403)
        }
    }

    /// The role (403) before visibility (404) and `If-Match` (412) on the two actions whose role
    /// the domain rule checked (a review, 2026-12-05: a driver's cancel with a stale tag got 412,
    /// and refetched and retried what it can never do), and the path's id (404) before a malformed
    /// `If-Match` (400) on every route.
    @Test func theRoleComesBeforeVisibilityAndIfMatchAndTheIdBeforeIfMatch() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let stale = ["If-Match": "\"o\(id)-v999\""]
            let cancel = try await server.request(
                "POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "cancelled"], headers: stale)
            #expect(cancel.status == 403, "\(cancel.text)")
            let unassign = try await server.request(
                "POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "new"], headers: stale)
            #expect(unassign.status == 403, "\(unassign.text)")
            for order in [id, 999_999] {
                let complete = try await server.request(
                    "POST", "/api/orders/\(order)/stages/1/complete", token: seed.dispatcherToken, json: [String: Any](),
                    headers: stale)
                #expect(complete.status == 403, "order \(order): \(complete.text)")
            }
            for (method, path) in [
                ("DELETE", "/api/orders/abc/"), ("POST", "/api/orders/abc/unassign"), ("POST", "/api/orders/abc/stages/1/complete"),
                ("POST", "/api/orders/\(id)/stages/abc/complete"),
            ] {
                let answer = try await server.request(
                    method, path, token: seed.dispatcherToken, json: [String: Any](), headers: ["If-Match": "nope"])
                #expect(answer.status == 404, "\(method) \(path): \(answer.text)")
            }
        }
    }

    /// `POST /status {"status":"new"}` on an assigned order is unassigning (SPEC §1's table:
    /// `assigned → new` by a dispatcher), with its event; it was 409 `invalid_transition`.
    @Test func statusNewOnAnAssignedOrderUnassignsIt() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let (socket, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let answer = try await server.request(
                "POST", "/api/orders/\(id)/status", token: seed.dispatcherToken, json: ["status": "new"])
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.object.string("status") == "new")
            #expect(answer.object["driver_id"] is NSNull)
            let event = await socket.nextEvent()
            #expect(event?["type"] as? String == "order_unassigned")
            let again = try await server.request(
                "POST", "/api/orders/\(id)/status", token: seed.dispatcherToken, json: ["status": "new"])
            #expect(again.status == 409, "only from assigned: \(again.text)")
            await socket.close()
        }
    }
}
