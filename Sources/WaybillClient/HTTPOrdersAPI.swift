public import Foundation

/// The Waybill REST API over an ``HTTPTransport`` (`URLSession` by default).
///
/// ```swift
/// let (api, user) = try await HTTPOrdersAPI.logIn(server: URL(string: "https://waybill.example")!,
///                                                 email: "ala@example.com", password: secret)
/// ```
/// Stateless and `Sendable`: share one value between tasks.
public struct HTTPOrdersAPI: OrdersAPI {
    /// The server's base URL (`https://host[:port]`), without `/api`.
    public let server: URL
    private let token: AccessToken
    private let transport: any HTTPTransport
    /// How long a finished (completed or cancelled) order stays on the driver's list.
    public let recentWindow: Duration
    /// The clock `recentWindow` counts back from (injected by tests).
    let now: @Sendable () -> Date
    /// Whether a server without `POST /api/ws-ticket` (one from before tickets) gets the API token
    /// in the WebSocket URL instead (SPEC §4's second way). Off by default: a URL lands in proxy
    /// access logs, and a proxy that merely fails to route the ticket endpoint would otherwise
    /// make every reconnect log the 30-day token (found by a review, 2026-12-03).
    public let tokenInURLFallback: Bool

    /// An API client for `server` that authenticates with `token` (from a login, or stored by the app).
    /// - Parameters:
    ///   - recentWindow: finished orders updated within this window stay on the list (24 h).
    ///   - tokenInURLFallback: see ``tokenInURLFallback``.
    public init(
        server: URL, token: AccessToken, transport: any HTTPTransport = URLSessionHTTPTransport(),
        recentWindow: Duration = .seconds(24 * 3600), now: @escaping @Sendable () -> Date = { Date() },
        tokenInURLFallback: Bool = false
    ) {
        self.server = server
        self.token = token
        self.transport = transport
        self.recentWindow = recentWindow
        self.now = now
        self.tokenInURLFallback = tokenInURLFallback
    }

    /// `POST /api/auth/login`: returns an API client holding the new token, and the user.
    /// - Throws: ``WaybillClientError/notAuthenticated`` for wrong credentials, or another ``WaybillClientError``.
    public static func logIn(
        server: URL,
        email: String,
        password: String,
        transport: any HTTPTransport = URLSessionHTTPTransport()
    ) async throws -> (api: HTTPOrdersAPI, user: DriverUser) {
        let request = APIRequest(
            method: "POST",
            url: server.appending(path: "api/auth/login"),
            headers: ["Content-Type": "application/json", "Accept": "application/json"],
            body: WireJSON.body(["email": email, "password": password])
        )
        let response = try await send(request, over: transport)
        try check(response)
        let login = try WireJSON.decode(LoginResponse.self, from: response.body, what: "login response")
        return (HTTPOrdersAPI(server: server, token: AccessToken(login.token), transport: transport), login.user)
    }

    /// The driver's list: active orders plus those finished recently (see `HTTPOrdersAPI+DriverList.swift`).
    public func orders(ifNoneMatch: String?) async throws -> Fetched<[OrderSummary]> {
        try await driverList(ifNoneMatch: ifNoneMatch)
    }

    public func order(_ id: OrderID, ifNoneMatch: String?) async throws -> Fetched<OrderDetail> {
        try await conditionalGet("api/orders/\(id)/", ifNoneMatch: ifNoneMatch, as: OrderDetail.self, what: "order")
    }

    public func changeStatus(of order: OrderID, to status: OrderStatus, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        try await send(.changeStatus(of: order, to: status), ifMatch: ifMatch, orderCreatedAt: nil, idempotencyKey: idempotencyKey)
    }

    public func completeStage(_ stage: StageID, of order: OrderID, ifMatch: String?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        try await send(.completeStage(stage, of: order), ifMatch: ifMatch, orderCreatedAt: nil, idempotencyKey: idempotencyKey)
    }

    public func attachDocument(
        named name: String, kind: String, to order: OrderID, ifMatch: String?, idempotencyKey: String?
    ) async throws -> SavedOrder {
        try await send(
            .attachDocument(name: name, kind: kind, to: order), ifMatch: ifMatch, orderCreatedAt: nil,
            idempotencyKey: idempotencyKey)
    }

    /// `POST`s the action with `If-Match`, `If-Order-Created` (whole milliseconds) and `Idempotency-Key`,
    /// each when given.
    public func send(_ action: DriverAction, ifMatch: String?, orderCreatedAt: Date?, idempotencyKey: String?)
        async throws -> SavedOrder
    {
        let order = action.orderID
        let created = orderCreatedAt.flatMap(Self.milliseconds)
        switch action {
        case .changeStatus(_, let status):
            return try await write(
                order, "api/orders/\(order)/status", body: ["status": status.rawValue], ifMatch: ifMatch,
                created: created, key: idempotencyKey)
        case .completeStage(let stage, _):
            return try await write(
                order, "api/orders/\(order)/stages/\(stage)/complete", body: nil, ifMatch: ifMatch, created: created,
                key: idempotencyKey)
        case .attachDocument(let name, let kind, _):
            return try await write(
                order, "api/orders/\(order)/documents", body: ["name": name, "kind": kind], ifMatch: ifMatch,
                created: created, key: idempotencyKey)
        }
    }

    /// `created_at` as `If-Order-Created` carries it: whole milliseconds since 1970, rounded as the
    /// server rounds them (the JSON's are whole already); `nil` for a time no `Int64` holds.
    static func milliseconds(_ date: Date) -> Int64? {
        Int64(exactly: (date.timeIntervalSince1970 * 1000).rounded())
    }

    /// Asks for a single-use ticket and builds `ws(s)://…/ws/orders/?ticket=…&cursor=C&since=N`.
    ///
    /// Both resume parameters go out when both are known: a server that checks cursors uses `cursor` and
    /// answers `reset` if its history was rewound; one that predates cursors (an old node during a rolling
    /// deploy) still resumes by `since` instead of silently not resuming at all.
    ///
    /// Falls back to `?token=` only when the ticket endpoint answers 404 (a server from before tickets)
    /// and ``tokenInURLFallback`` allows it; any other failure is thrown, so a token never goes into
    /// a URL by accident.
    public func eventSocketRequest(since: EventID?, cursor: ResumeCursor?) async throws -> SocketRequest {
        var query: [URLQueryItem]
        let response = try await send("POST", "api/ws-ticket", body: nil)
        if response.status == 404, tokenInURLFallback {
            query = [URLQueryItem(name: "token", value: token.value)]
        } else {
            try Self.check(response)
            let ticket = try WireJSON.decode(TicketResponse.self, from: response.body, what: "ticket")
            query = [URLQueryItem(name: "ticket", value: ticket.ticket)]
        }
        if let cursor { query.append(URLQueryItem(name: "cursor", value: cursor.rawValue)) }
        if let since { query.append(URLQueryItem(name: "since", value: String(since.rawValue))) }
        guard var components = URLComponents(url: server.appending(path: "ws/orders/"), resolvingAgainstBaseURL: false)
        else { throw WaybillClientError.badResponse("bad server URL") }
        components.scheme = components.scheme == "https" ? "wss" : "ws"
        components.queryItems = query
        guard let url = components.url else { throw WaybillClientError.badResponse("bad server URL") }
        return SocketRequest(url: url)
    }

    // MARK: - Plumbing

    /// A `POST` that answers the order, sent with `If-Match` when the caller knows the version it acts on,
    /// `If-Order-Created` when it knows which order it means, and `Idempotency-Key` when it may retry it.
    private func write(
        _ order: OrderID, _ path: String, body: [String: String]?, ifMatch: String?, created: Int64?, key: String?
    ) async throws -> SavedOrder {
        var headers = ["Accept": "application/json"]
        if let ifMatch { headers["If-Match"] = ifMatch }
        if let created { headers["If-Order-Created"] = String(created) }
        if let key { headers["Idempotency-Key"] = key }
        let response = try await send("POST", path, headers: headers, body: body)
        try Self.check(response)
        let replayed = response.header("Idempotent-Replayed")?.lowercased() == "true"
        let saved: OrderDetail
        do {
            saved = try WireJSON.decode(OrderDetail.self, from: response.body, what: "order")
        } catch {
            throw Self.unreadable(response, of: order, replayed: replayed)
        }
        return SavedOrder(order: saved, etag: response.header("ETag"), isReplay: replayed)
    }

    /// A write's 2xx whose body cannot be read. Applied only if Waybill answered: its `ETag` names
    /// this order's new version, or it says it replayed a stored answer; then an offline queue must
    /// not retry it as a failure (every retry replays the same answer) and give up on a write that
    /// is done. Anything else (a captive portal's or a proxy's own 200 page) never reached the
    /// server as far as the client can tell: like no answer at all, it is retried with the same key.
    static func unreadable(_ response: APIResponse, of order: OrderID, replayed: Bool) -> WaybillClientError {
        let etag = response.header("ETag").flatMap { tag in ActionQueue.orderVersion(of: tag)?.order == order ? tag : nil }
        guard etag != nil || replayed else {
            return .unreachable("HTTP \(response.status) with a body that is not Waybill's (a captive portal?)")
        }
        return .unreadableAnswer(status: response.status, etag: etag)
    }

    func conditionalGet<T: Decodable & Sendable>(
        _ path: String,
        query: [URLQueryItem] = [],
        ifNoneMatch: String?,
        as type: T.Type,
        what: String
    ) async throws -> Fetched<T> {
        var headers = ["Accept": "application/json"]
        if let ifNoneMatch { headers["If-None-Match"] = ifNoneMatch }
        let response = try await send("GET", path, query: query, headers: headers, body: nil)
        if response.status == 304 { return .notModified }
        try Self.check(response)
        return .modified(try WireJSON.decode(type, from: response.body, what: what), etag: response.header("ETag"))
    }

    private func send(
        _ method: String, _ path: String, query: [URLQueryItem] = [], headers: [String: String] = [:],
        body: [String: String]?
    ) async throws -> APIResponse {
        var headers = headers
        headers["Authorization"] = "Bearer \(token.value)"
        if body != nil { headers["Content-Type"] = "application/json" }
        var url = server.appending(path: path)
        if !query.isEmpty { url.append(queryItems: query) }
        let request = APIRequest(
            method: method,
            url: url,
            headers: headers,
            body: body.map(WireJSON.body)
        )
        return try await Self.send(request, over: transport)
    }

    private static func send(_ request: APIRequest, over transport: any HTTPTransport) async throws -> APIResponse {
        do {
            return try await transport.send(request)
        } catch let error as WaybillClientError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // The underlying error text may quote the URL; say only what was being done.
            throw WaybillClientError.unreachable("\(request) failed")
        }
    }

    /// Throws the ``WaybillClientError`` for a non-2xx response.
    private static func check(_ response: APIResponse) throws {
        guard !(200..<300).contains(response.status) else { return }
        let body = try? JSONDecoder().decode(ErrorBody.self, from: response.body)
        throw WaybillClientError.http(status: response.status, code: body?.error, message: body?.message)
    }

    private struct ErrorBody: Decodable {
        var error: String?
        var message: String?
    }

    private struct TicketResponse: Decodable {
        var ticket: String
    }

    private struct LoginResponse: Decodable {
        var token: String
        var user: DriverUser
    }
}

/// An API token. Prints as `<redacted>` so it cannot reach a log line by accident.
public struct AccessToken: Hashable, Sendable, CustomStringConvertible {
    /// The secret itself; send it, never print it.
    public let value: String
    /// Wraps a token from a login or from the app's keychain.
    public init(_ value: String) { self.value = value }
    public var description: String { "<redacted>" }
}

/// The logged-in user, as `POST /api/auth/login` returns it.
public struct DriverUser: Hashable, Sendable, Codable {
    /// The user id; for a driver also the `driver_id` on orders.
    public var id: Int64
    /// Login e-mail.
    public var email: String
    /// `driver` or `dispatcher`.
    public var role: String
    /// The user's company, if any.
    public var companyID: Int64?

    /// A user with the given fields.
    public init(id: Int64, email: String, role: String, companyID: Int64?) {
        self.id = id
        self.email = email
        self.role = role
        self.companyID = companyID
    }

    enum CodingKeys: String, CodingKey {
        case id, email, role
        case companyID = "company_id"
    }
}
