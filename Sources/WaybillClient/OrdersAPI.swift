public import struct Foundation.Date

/// The REST API as the driver session uses it (SPEC §2). ``HTTPOrdersAPI`` is the real one; tests fake it.
///
/// Every method throws ``WaybillClientError``. Writes take `ifMatch`: the `ETag` of the order as the caller
/// last saw it (`"o42-v7"`), or `nil` to write whatever the current version is. When the order has changed
/// since, the server refuses with 412 and the write throws ``WaybillClientError/conflict`` with `status` 412.
/// Writes also take `idempotencyKey` (sent as `Idempotency-Key`): a retry with the same key is applied at
/// most once, and its answer is the stored one (``SavedOrder/isReplay``). The forms without a key remain
/// as extension methods, so callers of earlier versions keep compiling.
public protocol OrdersAPI: Sendable {
    /// `GET /api/orders/` with `If-None-Match: ifNoneMatch`: the driver's orders, or `.notModified`.
    func orders(ifNoneMatch: String?) async throws -> Fetched<[OrderSummary]>
    /// `GET /api/orders/{id}/` with `If-None-Match: ifNoneMatch`: one whole order, or `.notModified`.
    func order(_ id: OrderID, ifNoneMatch: String?) async throws -> Fetched<OrderDetail>
    /// `POST /api/orders/{id}/status` with `If-Match` and `Idempotency-Key` (each when given): the order as saved.
    func changeStatus(of order: OrderID, to status: OrderStatus, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    /// `POST /api/orders/{id}/stages/{sid}/complete` with `If-Match` and `Idempotency-Key`: the order as saved.
    func completeStage(_ stage: StageID, of order: OrderID, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    /// `POST /api/orders/{id}/documents` `{"name","kind"}` with `If-Match` and `Idempotency-Key`: the order as saved.
    func attachDocument(named name: String, kind: String, to order: OrderID, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    /// Sends a driver's `action` (its `POST`) with `If-Match`, `Idempotency-Key`, and `If-Order-Created`:
    /// `orderCreatedAt`, the order's `created_at` as the driver's screen had it, so that the write never
    /// reaches another order that took the id after the server's data was restored (412). Each part
    /// goes only when given. No default: a wrapper around another `OrdersAPI` must pass the time on,
    /// or an offline action could reach another order after a restore.
    func send(_ action: DriverAction, ifMatch: String?, orderCreatedAt: Date?, idempotencyKey: String?)
        async throws -> SavedOrder
    /// The request that opens the event socket, authenticated and resuming after `since` / at `cursor`.
    ///
    /// The real API asks for a single-use ticket (`POST /api/ws-ticket`) each time, so a token never goes
    /// into a URL unless the server has no ticket endpoint.
    func eventSocketRequest(since: EventID?, cursor: ResumeCursor?) async throws -> SocketRequest
}

extension OrdersAPI {
    /// `POST /api/orders/{id}/status` with `If-Match: ifMatch`, without an idempotency key.
    public func changeStatus(of order: OrderID, to status: OrderStatus, ifMatch: String?) async throws -> SavedOrder {
        try await changeStatus(of: order, to: status, ifMatch: ifMatch, idempotencyKey: nil)
    }

    /// `POST /api/orders/{id}/stages/{sid}/complete` with `If-Match: ifMatch`, without an idempotency key.
    public func completeStage(_ stage: StageID, of order: OrderID, ifMatch: String?) async throws -> SavedOrder {
        try await completeStage(stage, of: order, ifMatch: ifMatch, idempotencyKey: nil)
    }

    /// `POST /api/orders/{id}/documents` with `If-Match: ifMatch`, without an idempotency key.
    public func attachDocument(named name: String, kind: String, to order: OrderID, ifMatch: String?)
        async throws -> SavedOrder
    {
        try await attachDocument(named: name, kind: kind, to: order, ifMatch: ifMatch, idempotencyKey: nil)
    }

    /// `POST /api/orders/{id}/status` without a precondition.
    public func changeStatus(of order: OrderID, to status: OrderStatus) async throws {
        _ = try await changeStatus(of: order, to: status, ifMatch: nil)
    }

    /// `POST /api/orders/{id}/stages/{sid}/complete` without a precondition.
    public func completeStage(_ stage: StageID, of order: OrderID) async throws {
        _ = try await completeStage(stage, of: order, ifMatch: nil)
    }

    /// The socket request resuming by event id only (no cursor).
    public func eventSocketRequest(since: EventID?) async throws -> SocketRequest {
        try await eventSocketRequest(since: since, cursor: nil)
    }
}

/// An order as a write returned it, with its new `ETag` (the `ifMatch` of the next write).
public struct SavedOrder: Hashable, Sendable {
    /// The order after the write.
    public var order: OrderDetail
    /// Its `ETag`, if the server sent one.
    public var etag: String?
    /// Whether this is the stored answer to an earlier request with the same `Idempotency-Key`
    /// (`Idempotent-Replayed: true`): the write was applied then, not now.
    public var isReplay: Bool

    /// A saved order with the given fields.
    public init(order: OrderDetail, etag: String?, isReplay: Bool = false) {
        self.order = order
        self.etag = etag
        self.isReplay = isReplay
    }
}

/// The result of a conditional GET.
public enum Fetched<Value: Sendable>: Sendable {
    /// A fresh body with its `ETag` (if the server sent one).
    case modified(Value, etag: String?)
    /// 304: what you have is current.
    case notModified
}

extension Fetched: Equatable where Value: Equatable {}
