import Foundation
import Testing

@testable import WaybillClient

@Suite(.timeLimit(.minutes(1))) struct HTTPOrdersAPITests {
    let http = FakeHTTPTransport()
    var api: HTTPOrdersAPI {
        HTTPOrdersAPI(server: URL(string: "https://waybill.test")!, token: AccessToken("secret-token"), transport: http)
    }

    private let row =
        #"{"id":42,"number":"2026/11/0042","status":"accepted","driver_id":7,"title":"Pallets","created_at":"2026-11-30T10:15:00.123Z","updated_at":"2026-11-30T10:16:00Z","version":3}"#

    @Test func listSendsTheBearerTokenAndReadsRowsAndETag() async throws {
        http.route("GET", "/api/orders/", headers: ["etag": "\"abc\""], json: "[\(row)]")
        let fetched = try await api.orders(ifNoneMatch: nil)
        guard case .modified(let rows, let etag) = fetched else {
            Issue.record("not modified")
            return
        }
        #expect(etag == "\"abc\"|\"abc\"")  // one tag per half of the driver's list
        #expect(rows.map(\.id) == [42])  // the same row in both halves is listed once
        #expect(rows.first?.status == .accepted)
        #expect(rows.first?.createdAt != nil)
        #expect(http.requests.first?.headers["Authorization"] == "Bearer secret-token")
        #expect(http.requests.first?.headers["If-None-Match"] == nil)
    }

    @Test func anUnchangedListIsA304() async throws {
        http.route("GET", "/api/orders/", status: 304)
        #expect(try await api.orders(ifNoneMatch: "\"abc\"|\"def\"") == .notModified)
        #expect(Set(http.requests.compactMap { $0.headers["If-None-Match"] }) == ["\"abc\"", "\"def\""])
    }

    @Test func theDriverListAsksForActiveOrdersAndThoseFinishedInTheLastDay() async throws {
        let now = Date(timeIntervalSince1970: 1_764_590_400)  // 2025-12-01T12:00:00Z
        let api = HTTPOrdersAPI(
            server: URL(string: "https://waybill.test")!, token: AccessToken("t"), transport: http, now: { now })
        http.route("GET", "/api/orders/", headers: ["etag": "\"x\""], json: "[\(row)]")
        _ = try await api.orders(ifNoneMatch: nil)
        let queries = Set(http.requests.map { URLComponents(url: $0.url, resolvingAgainstBaseURL: false)?.query ?? "" })
        #expect(
            queries == [
                "active=true&limit=500",
                "status=completed&status=cancelled&updated_after=2025-11-30T12:00:00.000Z&limit=500",
            ])
    }

    @Test func mergingKeepsEachOrderOnceNewestFirstWithItsNewerVersion() throws {
        func summary(_ id: Int, _ status: String, version: Int) throws -> OrderSummary {
            try WireJSON.decode(
                OrderSummary.self,
                from: Data(#"{"id":\#(id),"number":"n\#(id)","status":"\#(status)","driver_id":7,"title":"t","version":\#(version)}"#.utf8),
                what: "row")
        }
        let active = [try summary(9, "in_progress", version: 3), try summary(4, "accepted", version: 2)]
        let recent = [try summary(9, "completed", version: 4), try summary(6, "cancelled", version: 5)]
        let merged = HTTPOrdersAPI.merge(active, recent)
        #expect(merged.map(\.id) == [9, 6, 4])
        #expect(merged.first?.status == .completed)
        #expect(HTTPOrdersAPI.splitTag("\"a\"|") ?? (nil, nil) == ("\"a\"", nil))
        #expect(HTTPOrdersAPI.splitTag("\"a\"") == nil)
    }

    @Test func detailDecodesStagesAndDocuments() async throws {
        let detail =
            #"{"id":42,"number":"2026/11/0042","status":"in_progress","driver_id":7,"title":"Pallets","notes":null,"version":4,"stages":[{"id":1,"position":1,"kind":"pickup","address":"Gdańsk","planned_at":"2026-11-30T10:00:00Z","completed_at":null}],"documents":[{"id":9,"name":"cmr.pdf","kind":"cmr","created_at":"2026-11-30T10:15:00.123Z"}]}"#
        http.route("GET", "/api/orders/42/", json: detail)
        guard case .modified(let order, _) = try await api.order(42, ifNoneMatch: nil) else {
            Issue.record("not modified")
            return
        }
        #expect(order.stages.first?.kind == "pickup")
        #expect(order.stages.first?.isCompleted == false)
        #expect(order.documents.first?.name == "cmr.pdf")
        #expect(order.notes == "")
    }

    @Test func errorsBecomeWaybillClientErrorsWithTheServersCode() async throws {
        http.route(
            "POST",
            "/api/orders/42/status",
            status: 409,
            json: #"{"error":"invalid_transition","message":"no"}"#
        )
        do {
            try await api.changeStatus(of: 42, to: .completed)
            Issue.record("no error")
        } catch let error as WaybillClientError {
            #expect(error == .conflict)
            #expect(error.code == "invalid_transition")
            #expect(error.status == 409)
        }
        #expect(String(decoding: http.requests.first?.body ?? Data(), as: UTF8.self) == #"{"status":"completed"}"#)
    }

    /// A driver action names the order by its creation time (`If-Order-Created`, whole milliseconds)
    /// when given one, beside `If-Match` and `Idempotency-Key`; the forms without it send none.
    @Test func aDriverActionSendsTheOrdersCreationTimeWhenGivenOne() async throws {
        let saved = #"{"id":42,"number":"2026/11/0042","status":"accepted","driver_id":7,"title":"Pallets","version":4,"stages":[],"documents":[]}"#
        http.route("POST", "/api/orders/42/status", json: saved)
        http.route("POST", "/api/orders/42/stages/3/complete", json: saved)
        let created = Date(timeIntervalSince1970: 1_764_910_042.123)
        _ = try await api.send(
            .changeStatus(of: 42, to: .accepted), ifMatch: #""o42-v3""#, orderCreatedAt: created, idempotencyKey: "k1")
        _ = try await api.send(.completeStage(3, of: 42), ifMatch: nil, orderCreatedAt: nil, idempotencyKey: nil)
        _ = try await api.changeStatus(of: 42, to: .accepted, ifMatch: nil)
        let headers = http.requests.map(\.headers)
        #expect(headers.map { $0["If-Order-Created"] } == ["1764910042123", nil, nil])
        #expect(headers.map { $0["If-Match"] } == [#""o42-v3""#, nil, nil])
        #expect(headers.map { $0["Idempotency-Key"] } == ["k1", nil, nil])
        #expect(HTTPOrdersAPI.milliseconds(Date(timeIntervalSince1970: -0.0015)) == -2)
        #expect(HTTPOrdersAPI.milliseconds(Date(timeIntervalSince1970: .infinity)) == nil)
    }

    /// The transport's error names the URL (as URLSession's does); what the client reports does not.
    @Test func unreachableServerIsReportedWithoutTheURL() async throws {
        let error = await #expect(throws: WaybillClientError.self) { _ = try await api.orders(ifNoneMatch: nil) }
        let reported = try #require(error)
        #expect(reported == .unreachable)
        #expect(!reported.description.contains("waybill.test"))
        #expect(!reported.description.contains("secret"))
    }

    @Test func socketUsesASingleUseTicketNeverTheToken() async throws {
        http.route("POST", "/api/ws-ticket", json: #"{"ticket":"tkt-1","expires_in":60}"#)
        let request = try await api.eventSocketRequest(since: 1234)
        #expect(request.url.scheme == "wss")
        #expect(request.url.absoluteString.hasPrefix("wss://waybill.test/ws/orders/?"))
        #expect(request.queryValue("ticket") == "tkt-1")
        #expect(request.queryValue("since") == "1234")
        #expect(!request.url.absoluteString.contains("secret-token"))
        #expect(request.pathAndQuery == "/ws/orders/?ticket=tkt-1&since=1234")
        #expect(request.description == "wss://waybill.test/ws/orders/?ticket=%3Credacted%3E&since=1234")
    }

    /// The same credential names as the server's log redaction, in any case.
    @Test func socketRequestDescriptionsHideEveryCredentialName() throws {
        let request = SocketRequest(
            url: try #require(URL(string: "wss://h/ws/orders/?Token=a1&access_token=b2&PASSWORD=c3&since=4")))
        #expect(request.description.contains("since=4"))
        for secret in ["a1", "b2", "c3"] { #expect(!request.description.contains(secret), "\(secret) leaked") }
    }

    /// A 404 from the ticket endpoint puts the token in the URL only when the app asked for that
    /// (a server from before tickets); by default it is an error, as a proxy that does not route
    /// the endpoint would otherwise have the 30-day token in its access log on every reconnect.
    @Test func socketFallsBackToTheTokenOnlyWhenAllowedAndThereIsNoTicketEndpoint() async throws {
        http.route("POST", "/api/ws-ticket", status: 404, json: #"{"error":"not_found","message":"no"}"#)
        await #expect(throws: WaybillClientError.notFound) { try await api.eventSocketRequest(since: nil) }
        let old = HTTPOrdersAPI(
            server: URL(string: "https://waybill.test")!, token: AccessToken("secret-token"), transport: http,
            tokenInURLFallback: true)
        let request = try await old.eventSocketRequest(since: nil)
        #expect(request.queryValue("token") == "secret-token")
        #expect(request.queryValue("since") == nil)
        #expect(!request.description.contains("secret-token"))
    }

    @Test func aRefusedTicketIsNotAuthenticatedAndNeverFallsBack() async {
        http.route("POST", "/api/ws-ticket", status: 401, json: #"{"error":"unauthorized","message":"no"}"#)
        await #expect(throws: WaybillClientError.notAuthenticated) { try await api.eventSocketRequest(since: nil) }
        http.route("POST", "/api/ws-ticket", status: 500)
        await #expect(throws: WaybillClientError.server) { try await api.eventSocketRequest(since: nil) }
    }

    @Test func plainHTTPServersGetAPlainWebSocket() async throws {
        http.route("POST", "/api/ws-ticket", json: #"{"ticket":"t","expires_in":60}"#)
        let api = HTTPOrdersAPI(server: URL(string: "http://127.0.0.1:8080")!, token: AccessToken("x"), transport: http)
        #expect(
            try await api.eventSocketRequest(since: nil).url.absoluteString == "ws://127.0.0.1:8080/ws/orders/?ticket=t"
        )
    }

    @Test func logInReturnsAnAPIHoldingTheToken() async throws {
        http.route(
            "POST",
            "/api/auth/login",
            json:
                #"{"token":"new-token","user":{"id":7,"email":"ala@x.pl","role":"driver","company_id":1,"name":"Ala"}}"#
        )
        http.route("GET", "/api/orders/", json: "[]")
        let (api, user) = try await HTTPOrdersAPI.logIn(
            server: URL(string: "https://waybill.test")!,
            email: "ala@x.pl",
            password: "pw",
            transport: http
        )
        #expect(user == DriverUser(id: 7, email: "ala@x.pl", role: "driver", companyID: 1))
        _ = try await api.orders(ifNoneMatch: nil)
        #expect(http.requests.last?.headers["Authorization"] == "Bearer new-token")
        #expect(http.requests.first?.headers["Authorization"] == nil)
        #expect("\(AccessToken("new-token"))" == "<redacted>")
    }

    @Test func wrongPasswordIsNotAuthenticated() async {
        http.route("POST", "/api/auth/login", status: 401, json: #"{"error":"invalid_credentials","message":"no"}"#)
        await #expect(throws: WaybillClientError.notAuthenticated) {
            _ = try await HTTPOrdersAPI.logIn(
                server: URL(string: "https://w.test")!,
                email: "a",
                password: "b",
                transport: self.http
            )
        }
    }

    @Test func updatesPrintAsJSONLines() {
        #expect(
            SessionUpdate.connection(.backingOff(attempt: 2, delay: .milliseconds(1500))).jsonLine
                == #"{"attempt":2,"delay_ms":1500,"state":"backing_off","type":"connection"}"#
        )
        #expect(SessionUpdate.detailRemoved(5).jsonLine == #"{"id":5,"type":"detail_removed"}"#)
        let dated = OrderSummary(
            id: 2,
            number: "N/2",
            status: .new,
            title: "T",
            createdAt: WireJSON.parseDate("2026-11-30T10:15:00.123Z")
        )
        #expect(SessionUpdate.orders([dated]).jsonLine.contains(#""created_at":"2026-11-30T10:15:00.123Z""#))
        let line = SessionUpdate.orders([OrderSummary(id: 1, number: "N/1", status: .new, title: "T")]).jsonLine
        #expect(line.hasPrefix(#"{"orders":[{"id":1,"number":"N/1","status":"new","title":"T","version":1}]"#))
    }
}
