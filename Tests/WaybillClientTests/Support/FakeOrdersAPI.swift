import Foundation
import Synchronization
@testable import WaybillClient

/// An in-memory REST API that counts requests, with the server's `ETag`/304 behaviour.
///
/// The list's tag is `"v<revision>"`, where the revision moves whenever the test changes the data, so an
/// unchanged list answers 304 exactly like the server. Detail fetches can be held in flight (``holdDetails``)
/// to test deduplication.
final class FakeOrdersAPI: OrdersAPI, Sendable {
    struct State {
        var rows: [OrderSummary] = []
        var details: [OrderID: OrderDetail] = [:]
        var dataRevision = 1
        var listRequests: [String?] = []  // the If-None-Match of each list request
        var detailRequests: [OrderID] = []
        var socketRequests: [EventID?] = []
        var socketCursors: [ResumeCursor?] = []
        var statusChanges: [(OrderID, OrderStatus)] = []
        var writeIfMatches: [String?] = []  // the If-Match of each write
        var socketError: WaybillClientError?
        var holdDetails = false
        var heldDetails: [CheckedContinuation<Void, Never>] = []
        var holdLists = false
        var heldLists: [CheckedContinuation<Void, Never>] = []
    }

    let state = Mutex(State())

    init(orders ids: [OrderID] = [1, 2, 3]) {
        state.withLock { state in
            for id in ids {
                state.rows.append(
                    OrderSummary(id: id, number: "2026/11/\(id)", status: .assigned, driverID: 7, title: "Order \(id)")
                )
                state.details[id] = OrderDetail(
                    id: id,
                    number: "2026/11/\(id)",
                    status: .assigned,
                    driverID: 7,
                    title: "Order \(id)"
                )
            }
        }
    }

    var listFetches: Int { state.withLock { $0.listRequests.count } }
    var listRequests: [String?] { state.withLock { $0.listRequests } }
    var detailRequests: [OrderID] { state.withLock { $0.detailRequests } }
    func detailFetches(_ id: OrderID) -> Int { state.withLock { $0.detailRequests.filter { $0 == id }.count } }
    var socketRequests: [EventID?] { state.withLock { $0.socketRequests } }
    var socketCursors: [ResumeCursor?] { state.withLock { $0.socketCursors } }
    var writeIfMatches: [String?] { state.withLock { $0.writeIfMatches } }

    /// The server's ETag of an order version.
    static func etag(_ id: OrderID, version: Int64) -> String { "\"o\(id)-v\(version)\"" }
    var heldDetailCount: Int { state.withLock { $0.heldDetails.count } }

    /// Forgets the request log (not the data).
    func resetCounts() {
        state.withLock { state in
            state.listRequests = []
            state.detailRequests = []
            state.socketRequests = []
            state.socketCursors = []
            state.writeIfMatches = []
        }
    }

    /// Changes order `id` the way the server would: new version, new list tag.
    func touch(_ id: OrderID, status: OrderStatus = .accepted) {
        state.withLock { state in
            state.dataRevision += 1
            if let index = state.rows.firstIndex(where: { $0.id == id }) {
                state.rows[index].status = status
                state.rows[index].version += 1
            }
            state.details[id]?.status = status
            state.details[id]?.version += 1
        }
    }

    /// Deletes order `id` on the "server".
    func delete(_ id: OrderID) {
        state.withLock { state in
            state.dataRevision += 1
            state.rows.removeAll { $0.id == id }
            state.details[id] = nil
        }
    }

    func setSocketError(_ error: WaybillClientError?) { state.withLock { $0.socketError = error } }

    func holdDetails(_ hold: Bool) { state.withLock { $0.holdDetails = hold } }

    /// Lets every held detail fetch finish.
    func releaseDetails() {
        let held = state.withLock { state in
            defer { state.heldDetails = [] }
            return state.heldDetails
        }
        for continuation in held { continuation.resume() }
    }

    func holdLists(_ hold: Bool) { state.withLock { $0.holdLists = hold } }

    var heldListCount: Int { state.withLock { $0.heldLists.count } }

    /// Lets every held list fetch finish.
    func releaseLists() {
        let held = state.withLock { state in
            defer { state.heldLists = [] }
            return state.heldLists
        }
        for continuation in held { continuation.resume() }
    }

    func orders(ifNoneMatch: String?) async throws -> Fetched<[OrderSummary]> {
        let hold = state.withLock { state in
            state.listRequests.append(ifNoneMatch)
            return state.holdLists
        }
        if hold {
            await withCheckedContinuation { continuation in state.withLock { $0.heldLists.append(continuation) } }
        }
        return state.withLock { state in
            let tag = "\"v\(state.dataRevision)\""
            return ifNoneMatch == tag ? .notModified : .modified(state.rows, etag: tag)
        }
    }

    func order(_ id: OrderID, ifNoneMatch: String?) async throws -> Fetched<OrderDetail> {
        let hold = state.withLock { state in
            state.detailRequests.append(id)
            return state.holdDetails
        }
        if hold {
            await withCheckedContinuation { continuation in state.withLock { $0.heldDetails.append(continuation) } }
        }
        return try state.withLock { state in
            guard let detail = state.details[id] else { throw WaybillClientError.notFound }
            let tag = Self.etag(id, version: detail.version)
            return ifNoneMatch == tag ? .notModified : .modified(detail, etag: tag)
        }
    }

    func changeStatus(of order: OrderID, to status: OrderStatus, ifMatch: String?) async throws -> SavedOrder {
        try write(order, ifMatch: ifMatch, status: status) { $0.statusChanges.append((order, status)) }
    }

    func completeStage(_ stage: StageID, of order: OrderID, ifMatch: String?) async throws -> SavedOrder {
        try write(order, ifMatch: ifMatch, status: nil) { _ in }
    }

    func attachDocument(named name: String, kind: String, to order: OrderID, ifMatch: String?) async throws -> SavedOrder {
        try write(order, ifMatch: ifMatch, status: nil) { _ in }
    }

    /// A write as the server does it: 404, then 412 unless `ifMatch` names the current version, then a new version.
    private func write(_ id: OrderID, ifMatch: String?, status: OrderStatus?, _ record: (inout State) -> Void)
        throws -> SavedOrder
    {
        try state.withLock { state in
            state.writeIfMatches.append(ifMatch)
            guard let current = state.details[id] else { throw WaybillClientError.http(status: 404, code: "not_found", message: nil) }
            if let ifMatch, ifMatch != "*", ifMatch != Self.etag(id, version: current.version) {
                throw WaybillClientError.http(status: 412, code: "precondition_failed", message: "changed meanwhile")
            }
            record(&state)
        }
        touch(id, status: status ?? state.withLock { $0.details[id]?.status } ?? .accepted)
        guard let saved = state.withLock({ $0.details[id] }) else {
            throw WaybillClientError.http(status: 404, code: "not_found", message: nil)
        }
        return SavedOrder(order: saved, etag: Self.etag(id, version: saved.version))
    }

    func eventSocketRequest(since: EventID?, cursor: ResumeCursor?) async throws -> SocketRequest {
        try state.withLock { state in
            state.socketRequests.append(since)
            state.socketCursors.append(cursor)
            if let error = state.socketError { throw error }
            var url = "ws://waybill.test/ws/orders/?ticket=t\(state.socketRequests.count)"
            if let cursor { url += "&cursor=\(cursor.rawValue)" }
            if let since { url += "&since=\(since.rawValue)" }
            return SocketRequest(url: URL(string: url)!)
        }
    }
}
