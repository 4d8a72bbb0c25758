/// The REST API as the driver session uses it (SPEC §2). ``HTTPOrdersAPI`` is the real one; tests fake it.
///
/// Every method throws ``WaybillClientError``.
public protocol OrdersAPI: Sendable {
    /// `GET /api/orders/` with `If-None-Match: ifNoneMatch`: the driver's orders, or `.notModified`.
    func orders(ifNoneMatch: String?) async throws -> Fetched<[OrderSummary]>
    /// `GET /api/orders/{id}/` with `If-None-Match: ifNoneMatch`: one whole order, or `.notModified`.
    func order(_ id: OrderID, ifNoneMatch: String?) async throws -> Fetched<OrderDetail>
    /// `POST /api/orders/{id}/status`.
    func changeStatus(of order: OrderID, to status: OrderStatus) async throws
    /// `POST /api/orders/{id}/stages/{sid}/complete`.
    func completeStage(_ stage: StageID, of order: OrderID) async throws
    /// The request that opens the event socket, authenticated and resuming after `since`.
    ///
    /// The real API asks for a single-use ticket (`POST /api/ws-ticket`) each time, so a token never goes
    /// into a URL unless the server has no ticket endpoint.
    func eventSocketRequest(since: EventID?) async throws -> SocketRequest
}

/// The result of a conditional GET.
public enum Fetched<Value: Sendable>: Sendable {
    /// A fresh body with its `ETag` (if the server sent one).
    case modified(Value, etag: String?)
    /// 304: what you have is current.
    case notModified
}

extension Fetched: Equatable where Value: Equatable {}
