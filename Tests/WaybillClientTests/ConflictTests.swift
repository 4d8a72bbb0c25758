import Foundation
import Synchronization
import Testing
import WaybillTesting

@testable import WaybillClient

/// Lost-update protection from the driver's side: actions carry `If-Match`, a 412 is `.conflict`.
@Suite(.timeLimit(.minutes(1))) struct ConflictTests {
    @Test func anActionOnAnOrderChangedMeanwhileIsAConflictAndReloadsIt() async throws {
        let h = await Harness.live()
        try await h.open(2)
        h.api.touch(2, status: .assigned)  // the dispatcher changed it; its event has not arrived yet
        h.api.resetCounts()
        do {
            try await h.session.changeStatus(of: 2, to: .accepted)
            Issue.record("no error")
        } catch let error as WaybillClientError {
            #expect(error == .conflict)
            #expect(error.isStaleVersion)
            #expect(error.status == 412)
        }
        #expect(h.api.writeIfMatches == [FakeOrdersAPI.etag(2, version: 1)])
        #expect(h.api.state.withLock { $0.statusChanges.isEmpty })
        // Reloaded before the error reached the caller: its `catch` already sees the server's order.
        #expect(await h.session.cachedDetail(2)?.version == 2)
        #expect(await h.session.cachedDetail(2)?.status == .assigned)
        // Redoing the action now names the version the driver sees, and goes through.
        try await h.session.changeStatus(of: 2, to: .accepted)
        #expect(h.api.writeIfMatches.last == FakeOrdersAPI.etag(2, version: 2))
    }

    @Test func aRefetchReadBeforeTheDriversWriteDoesNotTakeTheDetailBack() async throws {
        let h = await Harness.live()
        try await h.open(2)
        // The dispatcher changed the order (version 2); the refetch this starts is answered with
        // version 2 and is still on its way when the driver acts on the order, whatever its version.
        h.api.touch(2, status: .assigned)
        h.api.holdDetails(true, answeredAtRequest: true)
        await h.session.refresh()
        await eventually("refetch in flight") { h.api.heldDetailCount == 1 }
        try await h.session.changeStatus(of: 2, to: .accepted, expecting: .any)
        #expect(await h.session.cachedDetail(2)?.version == 3)
        h.api.holdDetails(false)
        h.api.releaseDetails()
        await eventually("refetch done") { await h.session.detailFetchesInFlight == 0 }
        #expect(await h.session.cachedDetail(2)?.version == 3)
        #expect(await h.session.cachedDetail(2)?.status == .accepted)
        // So the next tap names the version the first one created, and goes through.
        try await h.session.changeStatus(of: 2, to: .inProgress)
        #expect(h.api.writeIfMatches == [nil, FakeOrdersAPI.etag(2, version: 3)])
    }

    @Test func aDirectWriteAnswered401StopsTheSessionAsCloseCode4001Does() async throws {
        let h = await Harness.live()
        h.api.failWrites([.notAuthenticated])
        await #expect(throws: WaybillClientError.notAuthenticated) {
            try await h.session.changeStatus(of: 1, to: .accepted)
        }
        #expect(await h.session.connectionState == .stopped(.notAuthenticated))
    }

    @Test func consecutiveActionsNameTheVersionThePreviousOneCreated() async throws {
        let h = await Harness.live()
        try await h.open(2)
        try await h.session.changeStatus(of: 2, to: .accepted)
        // No refetch has happened yet (the coalescing window is open): the write's answer is the cache.
        #expect(await h.session.cachedDetail(2)?.version == 2)
        try await h.session.changeStatus(of: 2, to: .inProgress)
        try await h.session.completeStage(5, of: 2)
        try await h.session.attachDocument(named: "POD.pdf", kind: "proof_of_delivery", to: 2)
        #expect(h.api.writeIfMatches == (1...4).map { FakeOrdersAPI.etag(2, version: $0) })
    }

    @Test func theCallerChoosesThePrecondition() async throws {
        let h = await Harness.live()
        try await h.session.changeStatus(of: 1, to: .accepted)  // not opened: nothing to compare with
        try await h.session.changeStatus(of: 3, to: .accepted, expecting: .version(1))
        try await h.open(2)
        try await h.session.changeStatus(of: 2, to: .accepted, expecting: .any)
        try await h.session.changeStatus(of: 2, to: .inProgress, expecting: .etag(#""o2-v2""#))
        #expect(h.api.writeIfMatches == [nil, #""o3-v1""#, nil, #""o2-v2""#])
        await #expect(throws: WaybillClientError.conflict) {
            try await h.session.completeStage(1, of: 3, expecting: .version(1))
        }
    }

    @Test func httpAPISendsIfMatchAndReads412AsAStaleVersionConflict() async throws {
        let http = FakeHTTPTransport()
        let api = HTTPOrdersAPI(server: URL(string: "https://waybill.test")!, token: AccessToken("t"), transport: http)
        let order = #"{"id":42,"number":"2026/11/0042","status":"accepted","driver_id":7,"title":"P","version":8}"#
        http.route("POST", "/api/orders/42/status", headers: ["etag": #""o42-v8""#], json: order)
        let saved = try await api.changeStatus(of: 42, to: .accepted, ifMatch: #""o42-v7""#)
        #expect(saved.order.version == 8)
        #expect(saved.etag == #""o42-v8""#)
        #expect(http.requests.last?.headers["If-Match"] == #""o42-v7""#)

        http.route(
            "POST", "/api/orders/42/documents", status: 412,
            json: #"{"error":"precondition_failed","message":"The order was changed meanwhile."}"#)
        do {
            _ = try await api.attachDocument(named: "POD.pdf", kind: "pod", to: 42, ifMatch: #""o42-v7""#)
            Issue.record("no error")
        } catch let error as WaybillClientError {
            #expect(error == .conflict)
            #expect(error.isStaleVersion)
            #expect(error.code == "precondition_failed")
        }
        let body = String(decoding: http.requests.last?.body ?? Data(), as: UTF8.self)
        #expect(body.contains(#""name":"POD.pdf""#))
        // Without a precondition no header is sent.
        _ = try await api.changeStatus(of: 42, to: .accepted, ifMatch: nil)
        #expect(http.requests.last?.headers["If-Match"] == nil)
    }

    @Test func theSocketRequestCarriesCursorAndSince() async throws {
        let http = FakeHTTPTransport()
        let api = HTTPOrdersAPI(server: URL(string: "https://waybill.test")!, token: AccessToken("t"), transport: http)
        http.route("POST", "/api/ws-ticket", json: #"{"ticket":"tkt","expires_in":60}"#)
        let request = try await api.eventSocketRequest(since: 1234, cursor: ResumeCursor("1234-0b7e55d1"))
        #expect(request.pathAndQuery == "/ws/orders/?ticket=tkt&cursor=1234-0b7e55d1&since=1234")
    }
}
