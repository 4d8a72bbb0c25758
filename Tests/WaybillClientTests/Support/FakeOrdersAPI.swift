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
        var detailIfNoneMatches: [String?] = []  // the If-None-Match of each detail request
        var socketRequests: [EventID?] = []
        var socketCursors: [ResumeCursor?] = []
        var statusChanges: [(OrderID, OrderStatus)] = []
        var writeIfMatches: [String?] = []  // the If-Match of each write
        var writeOrderCreated: [Int64?] = []  // the If-Order-Created of each driver action sent
        var socketError: WaybillClientError?
        var holdDetails = false
        /// Whether a held detail fetch answers with the order as it was when the request came (a
        /// server that read the row, then a slow network) instead of as it is at the release.
        var detailsAnsweredAtRequest = false
        var heldDetails: [CheckedContinuation<Void, Never>] = []
        var holdLists = false
        var heldLists: [CheckedContinuation<Void, Never>] = []
        /// Writes as the "server" applied them, in order: `(key, what)`.
        var appliedWrites: [(key: String?, what: String)] = []
        /// Every write attempt's `Idempotency-Key`, applied or not.
        var writeKeys: [String?] = []
        /// Stored answers per idempotency key, as the server keeps them: the request and its saved order.
        var idempotent: [String: (request: String, saved: SavedOrder)] = [:]
        /// Errors the next write attempts throw before reaching the "server" (unreachable, 503, …).
        var writeFailures: [WaybillClientError] = []
        /// The next detail fetches fail with these, in order.
        var detailFailures: [WaybillClientError] = []
        /// The next list fetches fail with these, in order.
        var listFailures: [WaybillClientError] = []
        /// How many of the next applied writes lose their answer on the way back (applied, then "offline").
        var responsesToLose = 0
        /// How many of the next applied writes come back as a 2xx with an unreadable body, and whether
        /// their `ETag` header survives (something between mangled the body).
        var responsesToGarble = 0
        var garbledKeepETag = true
        /// Orders whose writes the "server" refuses with 409 (e.g. cancelled by the dispatcher).
        var refusing: Set<OrderID> = []
        var holdWrites = false
        var heldWrites: [CheckedContinuation<Void, Never>] = []
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
    var detailIfNoneMatches: [String?] { state.withLock { $0.detailIfNoneMatches } }
    func detailFetches(_ id: OrderID) -> Int { state.withLock { $0.detailRequests.filter { $0 == id }.count } }
    var socketRequests: [EventID?] { state.withLock { $0.socketRequests } }
    var socketCursors: [ResumeCursor?] { state.withLock { $0.socketCursors } }
    var writeIfMatches: [String?] { state.withLock { $0.writeIfMatches } }
    var writeOrderCreated: [Int64?] { state.withLock { $0.writeOrderCreated } }

    /// The server's ETag of an order version.
    static func etag(_ id: OrderID, version: Int64) -> String { "\"o\(id)-v\(version)\"" }
    /// The ETag of a garbled answer: with a check, as the real server's carries, so a test can tell it
    /// from the bare tag the client builds itself. The fake matches either, exactly.
    static func garbledETag(_ id: OrderID, version: Int64) -> String { "\"o\(id)-v\(version)-h0000beef\"" }
    var heldDetailCount: Int { state.withLock { $0.heldDetails.count } }

    /// Forgets the request log (not the data).
    func resetCounts() {
        state.withLock { state in
            state.listRequests = []
            state.detailRequests = []
            state.detailIfNoneMatches = []
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

    /// Takes order `id` back to `version`, as a restore from a backup or a failover to a lagging
    /// replica does: a lower version, another list tag.
    func rewind(_ id: OrderID, to version: Int64, status: OrderStatus = .assigned) {
        state.withLock { state in
            state.dataRevision += 1
            if let index = state.rows.firstIndex(where: { $0.id == id }) {
                state.rows[index].status = status
                state.rows[index].version = version
            }
            state.details[id]?.status = status
            state.details[id]?.version = version
        }
    }

    /// The "server's" current version of order `id`.
    func version(of id: OrderID) -> Int64? { state.withLock { $0.details[id]?.version } }

    /// Deletes order `id` on the "server".
    func delete(_ id: OrderID) {
        state.withLock { state in
            state.dataRevision += 1
            state.rows.removeAll { $0.id == id }
            state.details[id] = nil
        }
    }

    func setSocketError(_ error: WaybillClientError?) { state.withLock { $0.socketError = error } }

    func holdDetails(_ hold: Bool, answeredAtRequest: Bool = false) {
        state.withLock {
            $0.holdDetails = hold
            $0.detailsAnsweredAtRequest = answeredAtRequest
        }
    }

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
        return try state.withLock { state in
            if !state.listFailures.isEmpty { throw state.listFailures.removeFirst() }
            let tag = "\"v\(state.dataRevision)\""
            return ifNoneMatch == tag ? .notModified : .modified(state.rows, etag: tag)
        }
    }

    func order(_ id: OrderID, ifNoneMatch: String?) async throws -> Fetched<OrderDetail> {
        let (hold, early) = state.withLock { state in
            state.detailRequests.append(id)
            state.detailIfNoneMatches.append(ifNoneMatch)
            let early = state.holdDetails && state.detailsAnsweredAtRequest
            return (state.holdDetails, early ? Result { try Self.answer(id, ifNoneMatch, &state) } : nil)
        }
        if hold {
            await withCheckedContinuation { continuation in state.withLock { $0.heldDetails.append(continuation) } }
        }
        if let early { return try early.get() }
        return try state.withLock { try Self.answer(id, ifNoneMatch, &$0) }
    }

    private static func answer(_ id: OrderID, _ ifNoneMatch: String?, _ state: inout State) throws
        -> Fetched<OrderDetail>
    {
        if !state.detailFailures.isEmpty { throw state.detailFailures.removeFirst() }
        guard let detail = state.details[id] else { throw WaybillClientError.notFound }
        let tag = etag(id, version: detail.version)
        return ifNoneMatch == tag ? .notModified : .modified(detail, etag: tag)
    }

    var appliedWrites: [String] { state.withLock { $0.appliedWrites.map(\.what) } }
    var appliedWriteKeys: [String?] { state.withLock { $0.appliedWrites.map(\.key) } }
    var writeKeys: [String?] { state.withLock { $0.writeKeys } }

    /// The next list fetches fail with these errors, in order.
    func failLists(_ errors: [WaybillClientError]) { state.withLock { $0.listFailures += errors } }

    /// The next detail fetches fail with these errors, in order.
    func failDetails(_ errors: [WaybillClientError]) { state.withLock { $0.detailFailures += errors } }
    /// Detail fetches answer again (failures still queued are dropped).
    func clearDetailFailures() { state.withLock { $0.detailFailures = [] } }

    /// The next writes fail with these errors, in order, before reaching the "server".
    func failWrites(_ errors: [WaybillClientError]) { state.withLock { $0.writeFailures += errors } }
    /// The next `count` applied writes lose their answer: the server applied them, the client sees "unreachable".
    func loseResponses(_ count: Int) { state.withLock { $0.responsesToLose += count } }
    /// The next `count` applied writes are answered 200 with a body the client cannot read.
    func garbleResponses(_ count: Int, keepETag: Bool) {
        state.withLock {
            $0.responsesToGarble += count
            $0.garbledKeepETag = keepETag
        }
    }
    /// Writes to order `id` are refused with 409 `invalid_transition` (as after a dispatcher cancelled it).
    func refuseWrites(to id: OrderID) { state.withLock { _ = $0.refusing.insert(id) } }

    /// Holds every write until ``releaseWrites()`` (a request still on its way when the app is killed).
    func holdWrites(_ hold: Bool) { state.withLock { $0.holdWrites = hold } }
    var heldWriteCount: Int { state.withLock { $0.heldWrites.count } }

    func releaseWrites() {
        let held = state.withLock { state in
            defer { state.heldWrites = [] }
            return state.heldWrites
        }
        for continuation in held { continuation.resume() }
    }

    func changeStatus(of order: OrderID, to status: OrderStatus, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        if state.withLock({ $0.holdWrites }) {
            await withCheckedContinuation { continuation in state.withLock { $0.heldWrites.append(continuation) } }
        }
        return try write(order, ifMatch: ifMatch, key: idempotencyKey, what: "status \(order) \(status)", status: status) {
            $0.statusChanges.append((order, status))
        }
    }

    func completeStage(_ stage: StageID, of order: OrderID, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        try write(order, ifMatch: ifMatch, key: idempotencyKey, what: "stage \(order) \(stage)", status: nil) { _ in }
    }

    func attachDocument(
        named name: String, kind: String, to order: OrderID, ifMatch: String?, idempotencyKey: String?
    ) async throws -> SavedOrder {
        try write(order, ifMatch: ifMatch, key: idempotencyKey, what: "document \(order) \(name)", status: nil) { _ in }
    }

    /// A driver action with `If-Order-Created`: the write below, which refuses it (412) as the server
    /// does when the order now under the id was created at another millisecond.
    func send(_ action: DriverAction, ifMatch: String?, orderCreatedAt: Date?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        let created = orderCreatedAt.flatMap(HTTPOrdersAPI.milliseconds)
        state.withLock { $0.writeOrderCreated.append(created) }
        switch action {
        case .changeStatus(let order, let status):
            if state.withLock({ $0.holdWrites }) {
                await withCheckedContinuation { continuation in state.withLock { $0.heldWrites.append(continuation) } }
            }
            return try write(
                order, ifMatch: ifMatch, created: created, key: idempotencyKey, what: "status \(order) \(status)",
                status: status
            ) { $0.statusChanges.append((order, status)) }
        case .completeStage(let stage, let order):
            return try write(
                order, ifMatch: ifMatch, created: created, key: idempotencyKey, what: "stage \(order) \(stage)",
                status: nil) { _ in }
        case .attachDocument(let name, _, let order):
            return try write(
                order, ifMatch: ifMatch, created: created, key: idempotencyKey, what: "document \(order) \(name)",
                status: nil) { _ in }
        }
    }

    /// A write as the server does it: a stored answer for a known idempotency key; 404; 412 unless the
    /// order was created at `created` (when given) and `ifMatch` names the current version; 409 for
    /// refused orders; then a new version.
    private func write(
        _ id: OrderID, ifMatch: String?, created: Int64? = nil, key: String?, what: String, status: OrderStatus?,
        _ record: (inout State) -> Void
    ) throws -> SavedOrder {
        let result: Result<SavedOrder, WaybillClientError> = state.withLock { state in
            state.writeIfMatches.append(ifMatch)
            state.writeKeys.append(key)
            if !state.writeFailures.isEmpty { return .failure(state.writeFailures.removeFirst()) }
            if let key, let stored = state.idempotent[key] {
                guard stored.request == what else {
                    return .failure(.http(status: 422, code: "idempotency_key_reused", message: "other request"))
                }
                var replay = stored.saved
                replay.isReplay = true
                return .success(replay)
            }
            guard var current = state.details[id] else {
                return .failure(.http(status: 404, code: "not_found", message: nil))
            }
            if let created, let createdAt = current.createdAt, created != HTTPOrdersAPI.milliseconds(createdAt) {
                return .failure(.http(status: 412, code: "order_replaced", message: "not the order you acted on"))
            }
            if let ifMatch, ifMatch != "*", ifMatch != Self.etag(id, version: current.version),
                ifMatch != Self.garbledETag(id, version: current.version)
            {
                return .failure(.http(status: 412, code: "precondition_failed", message: "changed meanwhile"))
            }
            if state.refusing.contains(id) {  // the order's rules come after its preconditions, as on the server
                return .failure(.http(status: 409, code: "invalid_transition", message: "order is cancelled"))
            }
            record(&state)
            state.dataRevision += 1
            current.version += 1
            if let status { current.status = status }
            state.details[id] = current
            if let index = state.rows.firstIndex(where: { $0.id == id }) {
                state.rows[index].status = current.status
                state.rows[index].version = current.version
            }
            let saved = SavedOrder(order: current, etag: Self.etag(id, version: current.version))
            state.appliedWrites.append((key, what))
            if let key { state.idempotent[key] = (what, saved) }
            if state.responsesToLose > 0 {
                state.responsesToLose -= 1
                return .failure(.unreachable("answer lost"))
            }
            if state.responsesToGarble > 0 {
                state.responsesToGarble -= 1
                let etag = state.garbledKeepETag ? Self.garbledETag(id, version: current.version) : nil
                return .failure(.unreadableAnswer(status: 200, etag: etag))
            }
            return .success(saved)
        }
        return try result.get()
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
