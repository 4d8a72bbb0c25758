import Foundation
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillSQLite
import WaybillStorage

@testable import WaybillAPI

/// Idempotent retries (SPEC §2): `Idempotency-Key` on the order writes, over real sockets.
@Suite(.timeLimit(.minutes(1)))
struct IdempotencyTests {
    /// A write with a fixed body (the same bytes every time: a repeat must match exactly).
    static func send(
        _ server: TestServer, _ method: String, _ path: String, token: String, body: String? = nil,
        key: String? = nil, headers extra: [String: String] = [:]
    ) async throws -> TestResponse {
        var headers = extra
        if body != nil { headers["Content-Type"] = "application/json" }
        if let key { headers["Idempotency-Key"] = key }
        return try await server.request(method, path, token: token, body: body.map { Data($0.utf8) }, headers: headers)
    }

    static func newestEvent(_ server: TestServer) async throws -> Int64 {
        try await server.store.read { tx in try tx.newestEventID() }.rawValue
    }

    static func titled(_ title: String, in server: TestServer, token: String) async throws -> [[String: Any]] {
        try await server.request("GET", "/api/orders/?q=\(title)", token: token).array
    }

    @Test func aRetriedCreateGetsTheSameAnswerAndCreatesNothing() async throws {
        try await TestServer.withRunning { server in
            let boss = try await server.seed(drivers: 1, orders: 0).dispatcherToken
            let before = try await Self.newestEvent(server)
            let body = #"{"title":"Pallets to Lyon","notes":"fragile"}"#
            let first = try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: "create-1")
            #expect(first.status == 201)
            #expect(first.headers["idempotent-replayed"] == nil)
            for _ in 0..<2 {
                let again = try await Self.send(
                    server, "POST", "/api/orders/", token: boss, body: body, key: "create-1")
                #expect(again.status == 201)
                #expect(again.body == first.body)
                #expect(again.headers["etag"] == first.headers["etag"])
                #expect(again.headers["content-type"] == "application/json")
                #expect(again.headers["idempotent-replayed"] == "true")
            }
            #expect(try await Self.newestEvent(server) == before + 1, "one order_created")
            #expect(try await Self.titled("Pallets", in: server, token: boss).count == 1)
            // Without a key, the same body is a new order.
            #expect(try await Self.send(server, "POST", "/api/orders/", token: boss, body: body).status == 201)
            #expect(try await Self.titled("Pallets", in: server, token: boss).count == 2)
        }
    }

    /// The replay is the first answer as it was, not the order as it is now.
    @Test func aRepeatedStatusChangeReplaysTheFirstAnswerAndChangesNothing() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let path = "/api/orders/\(id)/status", accept = #"{"status":"accepted"}"#
            let first = try await Self.send(
                server, "POST", path, token: driver.token, body: accept, key: "accept-\(id)")
            #expect(first.status == 200)
            let version = try #require(first.object.int("version"))
            let patched = try await Self.send(
                server, "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, body: #"{"notes":"gate 4"}"#)
            #expect(patched.object.int("version") == version + 1)
            let events = try await Self.newestEvent(server)

            let again = try await Self.send(
                server, "POST", path, token: driver.token, body: accept, key: "accept-\(id)")
            #expect(again.status == 200, "without the key this would be 409 invalid_transition: \(again.text)")
            #expect(again.body == first.body)
            #expect(IfMatchTests.isOrderTag(again.headers["etag"], id: id, version: version))
            #expect(again.headers["idempotent-replayed"] == "true")
            // The router ignores empty segments, and so does the key: a padded path is the same
            // request, and the record keeps the short path. (lws already collapses the slashes of a
            // request line; `IdempotencyGuard.path` does not rely on it, see the guard's tests.)
            let padded = try await Self.send(
                server, "POST", "/api//orders///\(id)//status//", token: driver.token, body: accept, key: "accept-\(id)")
            #expect(padded.status == 200 && padded.headers["idempotent-replayed"] == "true", "\(padded.text)")
            let user = UserID(driver.id)
            let record = try await server.store.write { tx in try tx.idempotencyRecord("accept-\(id)", of: user) }
            #expect(record?.request.path == "/api/orders/\(id)/status")
            #expect(try await Self.newestEvent(server) == events)
            let now = try await server.request("GET", "/api/orders/\(id)/", token: driver.token)
            #expect(now.object.int("version") == version + 1)
        }
    }

    /// A refused request (4xx) changed nothing and its answer is stored: the repeat gets the same
    /// refusal, even once the request would succeed (a new key asks again).
    @Test func aRefusalIsStoredAndReplayed() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let path = "/api/orders/\(id)/status", start = #"{"status":"in_progress"}"#
            let refused = try await Self.send(server, "POST", path, token: driver.token, body: start, key: "start")
            #expect(refused.status == 409)
            #expect(refused.errorCode == "invalid_transition")
            let accepted = try await Self.send(
                server, "POST", path, token: driver.token, body: #"{"status":"accepted"}"#)
            #expect(accepted.status == 200)
            let again = try await Self.send(server, "POST", path, token: driver.token, body: start, key: "start")
            #expect(again.status == 409)
            #expect(again.body == refused.body)
            #expect(again.headers["idempotent-replayed"] == "true")
            let fresh = try await Self.send(server, "POST", path, token: driver.token, body: start, key: "start-2")
            #expect(fresh.status == 200)
            #expect(fresh.object.string("status") == "in_progress")
        }
    }

    @Test func aKeyUsedForAnotherRequestIs422AndChangesNothing() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let first = try await Self.send(
                server, "PATCH", "/api/orders/\(id)/", token: boss, body: #"{"notes":"one"}"#, key: "k")
            #expect(first.status == 200)
            let events = try await Self.newestEvent(server)
            for (method, path, body) in [
                ("PATCH", "/api/orders/\(id)/", #"{"notes":"two"}"#),  // another body
                ("POST", "/api/orders/", #"{"notes":"one"}"#),  // another method and path
                ("DELETE", "/api/orders/\(id)/", nil),
            ] {
                let reused = try await Self.send(server, method, path, token: boss, body: body, key: "k")
                #expect(reused.status == 422, "\(method) \(path)")
                #expect(reused.errorCode == "idempotency_key_reused")
                #expect((reused.object["message"] as? String)?.isEmpty == false)
            }
            #expect(try await Self.newestEvent(server) == events)
            // Trailing slashes are optional in paths, for keys too: this is the same request.
            let same = try await Self.send(
                server, "PATCH", "/api/orders/\(id)", token: boss, body: #"{"notes":"one"}"#, key: "k")
            #expect(same.status == 200)
            #expect(same.headers["idempotent-replayed"] == "true")
            let order = try await server.request(
                "GET", "/api/orders/\(id)/", token: boss, headers: ["Idempotency-Key": "k"])
            #expect(order.status == 200, "reads ignore the header")
            #expect(order.object.string("notes") == "one")
        }
    }

    @Test func aMalformedKeyIs400AndAKeyOf255CharactersWorks() async throws {
        try await TestServer.withRunning { server in
            let boss = try await server.seed(drivers: 1, orders: 0).dispatcherToken
            let events = try await Self.newestEvent(server)
            let body = #"{"title":"Keyed"}"#
            for key in [String(repeating: "k", count: 256), "naïve-key"] {
                let answer = try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: key)
                #expect(answer.status == 400, "\(key.prefix(20))")
                #expect(answer.errorCode == "invalid_header")
            }
            #expect(try await Self.newestEvent(server) == events)
            // Without a valid token the answer is 401 whatever the key looks like (the token first).
            for token in ["", "not-a-token"] {
                let answer = try await Self.send(
                    server, "POST", "/api/orders/", token: token, body: body, key: String(repeating: "k", count: 300))
                #expect(answer.status == 401, "token \(token.isEmpty ? "missing" : "bad")")
            }
            let longest = " ~!" + String(repeating: "x", count: 252)
            let first = try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: longest)
            #expect(first.status == 201)
            let again = try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: longest)
            #expect(again.headers["idempotent-replayed"] == "true")
            #expect(again.body == first.body)
        }
    }

    @Test func keysBelongToTheirUser() async throws {
        try await TestServer.withRunning { server in
            let acme = try await server.seed(drivers: 1, orders: 0)
            let globex = try await server.seed(drivers: 1, orders: 0, company: "Globex")
            let body = #"{"title":"Same key"}"#
            let ours = try await Self.send(
                server, "POST", "/api/orders/", token: acme.dispatcherToken, body: body, key: "shared")
            let theirs = try await Self.send(
                server, "POST", "/api/orders/", token: globex.dispatcherToken, body: body, key: "shared")
            #expect(ours.status == 201)
            #expect(theirs.status == 201)
            #expect(theirs.headers["idempotent-replayed"] == nil)
            #expect(ours.object.int("id") != theirs.object.int("id"))
            // In one company too: the driver's "shared" is not the dispatcher's.
            let id = try #require(ours.object.int("id"))
            let assigned = try await Self.send(
                server, "POST", "/api/orders/\(id)/assign", token: acme.dispatcherToken,
                body: #"{"driver_id":\#(acme.drivers[0].id)}"#)
            #expect(assigned.status == 200)
            let accepted = try await Self.send(
                server, "POST", "/api/orders/\(id)/status", token: acme.drivers[0].token,
                body: #"{"status":"accepted"}"#,
                key: "shared")
            #expect(accepted.status == 200)
            #expect(accepted.object.string("status") == "accepted")
        }
    }

    @Test func unauthenticatedRequestsClaimNothing() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let body = #"{"title":"Who"}"#
            let anonymous = try await server.request(
                "POST", "/api/orders/", body: Data(body.utf8), headers: ["Idempotency-Key": "anon"])
            #expect(anonymous.status == 401)
            let records = try await server.store.write { tx in
                try tx.idempotencyRecord("anon", of: UserID(seed.dispatcher.id))
            }
            #expect(records == nil)
            let real = try await Self.send(
                server, "POST", "/api/orders/", token: seed.dispatcherToken, body: body, key: "anon")
            #expect(real.status == 201)
            #expect(real.headers["idempotent-replayed"] == nil)
        }
    }

    @Test func aRetriedDeleteIsReplayedNot404() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let boss = seed.dispatcherToken, id = try #require(seed.drivers[0].orderIDs?.first)
            let events = try await Self.newestEvent(server)
            let first = try await Self.send(server, "DELETE", "/api/orders/\(id)/", token: boss, key: "del-\(id)")
            #expect(first.status == 204)
            let again = try await Self.send(server, "DELETE", "/api/orders/\(id)/", token: boss, key: "del-\(id)")
            #expect(again.status == 204)
            #expect(again.headers["idempotent-replayed"] == "true")
            #expect(again.body.isEmpty)
            #expect(try await Self.newestEvent(server) == events + 1, "one order_deleted")
            #expect(try await Self.send(server, "DELETE", "/api/orders/\(id)/", token: boss).status == 404)
        }
    }

    /// Ten copies of one request at once: one is applied, the others wait their turn (409) or
    /// get its answer; one event.
    @Test func concurrentDuplicatesAreAppliedOnce() async throws {
        try await TestServer.withRunning { server in
            let boss = try await server.seed(drivers: 1, orders: 0).dispatcherToken
            let events = try await Self.newestEvent(server)
            let body = #"{"title":"Once only"}"#
            let answers = try await withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<10 {
                    group.addTask {
                        try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: "burst")
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let applied = answers.filter { $0.status == 201 && $0.headers["idempotent-replayed"] == nil }
            #expect(applied.count == 1)
            for answer in answers where !(answer.status == 201 && answer.headers["idempotent-replayed"] == nil) {
                if answer.status == 409 {
                    #expect(answer.errorCode == "idempotency_key_in_use")
                    #expect(answer.headers["retry-after"] == "1")
                } else {
                    #expect(answer.status == 201)
                    #expect(answer.headers["idempotent-replayed"] == "true")
                    #expect(answer.body == applied.first?.body)
                }
            }
            #expect(try await Self.newestEvent(server) == events + 1)
            #expect(try await Self.titled("Once", in: server, token: boss).count == 1)
            // Once the first finished, a retry gets its answer.
            let late = try await Self.send(server, "POST", "/api/orders/", token: boss, body: body, key: "burst")
            #expect(late.headers["idempotent-replayed"] == "true")
            #expect(late.body == applied.first?.body)
        }
    }

    /// A claim another node holds right now is in use; one whose node died long ago is taken over.
    @Test func aRunningClaimIs409AndAStaleOneIsTakenOver() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let user = UserID(seed.dispatcher.id), body = #"{"title":"Taken over"}"#
            let request = HTTPRequestFingerprint.of("POST", "/api/orders/", body)
            for (key, age) in [("running", 0.0), ("stale", 3600.0)] {
                let claim = IdempotentRequest(
                    userID: user, key: key, method: "POST", path: "/api/orders", fingerprint: request)
                let planted = try await server.store.write { tx in
                    try tx.claimIdempotencyKey(claim, token: "other-node", at: Date() - age, staleAfter: 30)
                }
                #expect(planted == .claimed)
            }
            let events = try await Self.newestEvent(server)
            let busy = try await Self.send(
                server, "POST", "/api/orders/", token: seed.dispatcherToken, body: body, key: "running")
            #expect(busy.status == 409)
            #expect(busy.errorCode == "idempotency_key_in_use")
            #expect(busy.headers["retry-after"] == "1")
            #expect(try await Self.newestEvent(server) == events)

            let taken = try await Self.send(
                server, "POST", "/api/orders/", token: seed.dispatcherToken, body: body, key: "stale")
            #expect(taken.status == 201)
            #expect(taken.headers["idempotent-replayed"] == nil)
            let record = try await server.store.write { tx in try tx.idempotencyRecord("stale", of: user) }
            #expect(record?.response?.status == 201)
            #expect(record?.token != "other-node")
            // The dead node's token can no longer store anything under the key.
            let late = try await server.store.write { tx in
                try tx.completeIdempotencyKey(
                    "stale", of: user, token: "other-node",
                    response: StoredResponse(status: 500, headers: [], body: []),
                    at: Date())
            }
            #expect(!late)
        }
    }
}

/// The fingerprint the server computes for a request, for tests that plant records.
enum HTTPRequestFingerprint {
    static func of(_ method: String, _ path: String, _ body: String) -> [UInt8] {
        IdempotencyGuard.fingerprint(.init(method: method, path: path, body: Array(body.utf8)))
    }
}
