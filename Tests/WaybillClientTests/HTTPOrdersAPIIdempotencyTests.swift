import Foundation
import Testing

@testable import WaybillClient

/// Writes carry `Idempotency-Key` when given one, and say when the answer was a stored replay.
struct HTTPOrdersAPIIdempotencyTests {
    let http = FakeHTTPTransport()
    var api: HTTPOrdersAPI {
        HTTPOrdersAPI(server: URL(string: "https://waybill.test")!, token: AccessToken("t"), transport: http)
    }

    private let order =
        #"{"id":42,"number":"2026/11/0042","status":"accepted","driver_id":7,"title":"Pallets","version":8}"#

    @Test func everyWriteSendsItsKeyAndReadsTheReplayHeader() async throws {
        http.route(
            "POST", "/api/orders/42/status", headers: ["ETag": #""o42-v8""#, "idempotent-replayed": "true"], json: order
        )
        http.route("POST", "/api/orders/42/stages/3/complete", headers: ["ETag": #""o42-v8""#], json: order)
        http.route("POST", "/api/orders/42/documents", headers: ["ETag": #""o42-v8""#], json: order)
        let replayed = try await api.changeStatus(of: 42, to: .accepted, ifMatch: #""o42-v7""#, idempotencyKey: "k1")
        let fresh = try await api.completeStage(3, of: 42, ifMatch: nil, idempotencyKey: "k2")
        _ = try await api.attachDocument(named: "POD.pdf", kind: "pod", to: 42, ifMatch: nil, idempotencyKey: "k3")
        #expect(replayed.isReplay && !fresh.isReplay)
        #expect(http.requests.map { $0.headers["Idempotency-Key"] } == ["k1", "k2", "k3"])
        #expect(http.requests.first?.headers["If-Match"] == #""o42-v7""#)
    }

    /// A write answered 2xx with a body that cannot be read was applied when Waybill answered it (an
    /// ETag that names this order's version, or a replayed answer): the error says so, with the
    /// status and that ETag, so a queue does not count it as a server failure. A 200 page that is
    /// not Waybill's (a captive portal; no ETag, or one for something else) is like no answer: the
    /// action is retried with its key (it was silently dropped as applied before a review). A 5xx
    /// with such a body stays a server failure.
    @Test func aWritesUnreadableAnswerIsASuccessOnlyWhenWaybillGaveIt() async throws {
        func failure(_ write: () async throws -> SavedOrder) async -> WaybillClientError? {
            do {
                _ = try await write()
                return nil
            } catch { return error as? WaybillClientError }
        }
        let html = "<html>proxy</html>"
        http.route("POST", "/api/orders/42/status", headers: ["ETag": #""o42-v8-h0b7e55d1""#], json: html)
        let named = await failure { try await api.changeStatus(of: 42, to: .accepted, ifMatch: nil, idempotencyKey: "k1") }
        #expect(named?.isUnreadableSuccess == true && named?.status == 200 && named?.etag == #""o42-v8-h0b7e55d1""#)
        http.route("POST", "/api/orders/43/status", status: 201, headers: ["Idempotent-Replayed": "true"], json: "{")
        let replayed = await failure { try await api.changeStatus(of: 43, to: .accepted, ifMatch: nil, idempotencyKey: "k2") }
        #expect(replayed?.isUnreadableSuccess == true && replayed?.status == 201 && replayed?.etag == nil)
        http.route("POST", "/api/orders/44/status", json: html)
        let portal = await failure { try await api.changeStatus(of: 44, to: .accepted, ifMatch: nil, idempotencyKey: "k3") }
        #expect(portal == .unreachable && portal?.isUnreadableSuccess == false)
        http.route("POST", "/api/orders/45/status", headers: ["ETag": #""o4-v8""#], json: html)
        let other = await failure { try await api.changeStatus(of: 45, to: .accepted, ifMatch: nil, idempotencyKey: "k4") }
        #expect(other == .unreachable, "an ETag for another order is no evidence")
        http.route("POST", "/api/orders/42/documents", status: 500, json: html)
        let server = await failure {
            try await api.attachDocument(named: "POD.pdf", kind: "pod", to: 42, ifMatch: nil, idempotencyKey: "k5")
        }
        #expect(server == .server && server?.isUnreadableSuccess == false)
        // No answer from Waybill: retried with the key; it may have reached the server (an expiry says so).
        #expect(ActionQueue.outcome(for: try #require(portal)) == .retry(countsAsServerFailure: false, mayHaveApplied: true))
    }

    @Test func writesWithoutAKeySendNoHeader() async throws {
        http.route("POST", "/api/orders/42/status", headers: ["ETag": #""o42-v8""#], json: order)
        _ = try await api.changeStatus(of: 42, to: .accepted, ifMatch: nil)
        try await api.changeStatus(of: 42, to: .accepted)
        #expect(http.requests.allSatisfy { $0.headers["Idempotency-Key"] == nil })
    }

    @Test func anActionUpdateIsOneFlatJSONLine() throws {
        var action = QueuedAction(
            id: ActionID(rawValue: "ab12"), action: .changeStatus(of: 42, to: .accepted), ifMatch: nil,
            queuedAt: Date(timeIntervalSince1970: 0))
        action.state = .refused(ActionRefusal(status: 409, code: "invalid_transition", message: "cancelled"))
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(SessionUpdate.action(action).jsonLine.utf8)) as? [String: Any])
        #expect(object["type"] as? String == "action" && object["action"] as? String == "status")
        #expect(object["order"] as? Int == 42 && object["status"] as? String == "accepted")
        #expect(object["id"] as? String == "ab12" && object["state"] as? String == "refused")
        let reason = try #require(object["reason"] as? [String: Any])
        #expect(reason["status"] as? Int == 409 && reason["error"] as? String == "invalid_transition")
    }
}
