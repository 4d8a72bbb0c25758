import Foundation
import WaybillDomain
import WaybillNetwork
import WaybillStorage

/// The route table of SPEC §2, read like the spec. Handlers throw; `APIResponder` maps errors.
struct Routes {
    let orders: OrderService
    let authenticator: Authenticator
    let health: HealthChecks
    let staticFiles: StaticFiles
    /// When set, `/metrics` wants `Authorization: Bearer <it>`.
    let metricsToken: Secret?
    /// Called after a user's tokens were revoked (closes their live sockets on this node).
    let loggedOut: @Sendable (Logout) -> Void
    /// Guards the order writes that carry `Idempotency-Key` (`nil`: the header is ignored).
    var idempotency: IdempotencyGuard? = nil
    /// Which address a login counts against (the peer, or the client behind a trusted proxy).
    var clientAddress = ClientAddress(trustedProxies: [])

    func router() -> Router {
        var r = Router()
        let orders = self.orders, auth = self.authenticator, health = self.health, files = self.staticFiles
        let loggedOut = self.loggedOut, metricsToken = self.metricsToken, clientAddress = self.clientAddress

        r.on("POST", "/api/auth/login") { request, _ in
            let body = try JSONCoding.decode(LoginRequest.self, from: request)
            let (token, user) = try await auth.login(
                email: try Validation.email(body.email), password: body.password, from: clientAddress.of(request),
                role: body.role)
            return try JSONCoding.response(LoginResponse(token: token.value, user: UserJSON(user: user))).notStored()
        }
        r.on("POST", "/api/auth/logout") { _, context in
            // Not charged to the user's request rate: a script flooding with a leaked token keeps the
            // bucket empty, and logging out (which revokes that token) must still get through.
            let user = try await context.requireUser(admitting: false).id
            loggedOut(try await auth.revokeTokens(of: user))
            return HTTPResponse(status: 204)
        }
        r.on("GET", "/api/me") { _, context in try JSONCoding.response(UserJSON(user: try await context.requireUser())) }
        r.on("POST", "/api/ws-ticket") { request, context in
            let (ticket, expiresIn) = try await auth.issueTicket(
                for: try await context.requireUser().id, authorization: request.headers["authorization"])
            return try JSONCoding.response(TicketResponse(ticket: ticket.value, expiresIn: expiresIn)).notStored()
        }
        r.on("GET", "/api/drivers") { _, context in
            let drivers = try await orders.drivers(for: try await context.requireDispatcher())
            return try JSONCoding.response(drivers.map(UserJSON.init))
        }
        r.on("GET", "/api/orders") { request, context in
            let actor = try await context.requireActor()
            let query = try OrderListRequest.parse(request)
            let page = try await orders.list(for: actor, query)
            let link = OrderListRequest.nextLink(for: request, page: page).map { [("Link", $0)] } ?? []
            return try Conditional.response(page.rows.map(OrderSummaryJSON.init), for: request, extra: link)
        }
        // Before `/api/orders/{id}`: the first pattern that fits a path wins.
        r.on("GET", "/api/orders/counts") { request, context in
            let counts = try await orders.counts(for: try await context.requireActor())
            let body = Dictionary(uniqueKeysWithValues: OrderStatus.allCases.map { ($0.rawValue, counts[$0] ?? 0) })
            return try Conditional.response(body, for: request)
        }
        Self.orderWrite(&r, "POST", "/api/orders", orders, status: 201) { request, _, actor in
            let body = try JSONCoding.decode(CreateOrderRequest.self, from: request)
            return try orders.create(body, by: actor)
        }
        r.on("GET", "/api/orders/{id}") { request, context in
            // The token before the id: a malformed id without a token was 404, not the SPEC's 401.
            let actor = try await context.requireActor()
            let order = try await orders.detail(try context.id("id"), for: actor)
            return try Conditional.response(OrderDetailJSON(order: order), for: request, etag: Conditional.etag(order))
        }
        Self.orderWrite(&r, "PATCH", "/api/orders/{id}", orders) { request, context, actor in
            // DESIGN.md's order: the token (401), what cannot be parsed (400), the role (403).
            let id: OrderID = try context.id("id")
            let body = try JSONCoding.decode(PatchOrderRequest.self, from: request)
            let ifMatch = try Conditional.ifMatch(request)
            try RequestContext.requireDispatcher(actor)
            return orders.patch(id, body, by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "DELETE", "/api/orders/{id}", orders, render: { _ in HTTPResponse(status: 204) }) {
            request, context, actor in
            // The path's id before `If-Match` (a malformed id is 404 before a 400: PROTOCOL, "Order
            // of checks"); the same on every route.
            let id: OrderID = try context.id("id")
            let ifMatch = try Conditional.ifMatch(request)
            return try orders.delete(id, by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "POST", "/api/orders/{id}/status", orders) { request, context, actor in
            let id: OrderID = try context.id("id")
            let body = try JSONCoding.decode(StatusRequest.self, from: request)
            let ifMatch = try Conditional.ifMatch(request)
            // The role before visibility and `If-Match`: a driver asking to cancel or unassign got
            // a 412 for a stale version, and so refetched and retried what it can never do.
            if body.status == .cancelled || body.status == .new { try RequestContext.requireDispatcher(actor) }
            return orders.changeStatus(id, to: body.status, by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "POST", "/api/orders/{id}/assign", orders) { request, context, actor in
            let id: OrderID = try context.id("id")
            let body = try JSONCoding.decode(AssignRequest.self, from: request)
            let ifMatch = try Conditional.ifMatch(request)
            try RequestContext.requireDispatcher(actor)
            return try orders.assign(id, to: UserID(body.driverID), by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "POST", "/api/orders/{id}/unassign", orders) { request, context, actor in
            let id: OrderID = try context.id("id")
            let ifMatch = try Conditional.ifMatch(request)
            try RequestContext.requireDispatcher(actor)
            return orders.unassign(id, by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "POST", "/api/orders/{id}/stages/{sid}/complete", orders) { request, context, actor in
            let id: OrderID = try context.id("id"), stage: StageID = try context.id("sid")
            let ifMatch = try Conditional.ifMatch(request)
            // Only the assigned driver completes a stage: a dispatcher's 403 comes before a 404 or 412.
            guard actor.role == .driver else { throw OrderRuleViolation.roleNotAllowed(actor.role) }
            return orders.completeStage(id, stage: stage, by: actor, ifMatch: ifMatch)
        }
        Self.orderWrite(&r, "POST", "/api/orders/{id}/documents", orders, status: 201) { request, context, actor in
            let id: OrderID = try context.id("id")
            let body = try JSONCoding.decode(DocumentRequest.self, from: request)
            let ifMatch = try Conditional.ifMatch(request)
            return orders.attach(body, to: id, by: actor, ifMatch: ifMatch)
        }
        r.on("GET", "/healthz") { _, _ in try JSONCoding.response(["status": "ok"]) }
        r.on("GET", "/readyz") { request, _ in try await health.ready(stopping: request.arrivedWhileStopping) }
        r.on("GET", "/metrics") { request, _ in
            if let metricsToken {
                try Self.requireBearer(metricsToken, in: request)
            } else {
                try Self.requireLocal(request)
            }
            return await health.metricsText()
        }
        r.on("GET", "/") { request, _ in files.response(for: "index.html", request: request) }
        r.on("GET", "/assets/{name}") { request, context in
            files.response(for: context.parameters["name"] ?? "", request: request)
        }
        if let idempotency { r.wrapHandlers(where: IdempotencyGuard.covers, idempotency.wrap) }
        return r
    }

    /// An order write (one of `OrderService`'s use cases), answered with `render` (the order's
    /// detail, with `status`): the route's handler, which runs it on the request's task, and the
    /// same steps without a task (`Router.ImmediateHandler`, `APIResponder.respondNow`), taken when
    /// the store can commit at once (`OrderService.runNow`). `prepare` runs after the token, so a
    /// 401 comes first, and checks the rest in DESIGN.md's order; under an `Idempotency-Key` the
    /// answer is stored in the write's own transaction (`IdempotentWrite.answer`, on the task only).
    private static func orderWrite(
        _ r: inout Router, _ method: String, _ pattern: String, _ orders: OrderService, status: Int = 200,
        render: (@Sendable (Order) throws -> HTTPResponse)? = nil,
        _ prepare: @escaping @Sendable (HTTPRequest, RequestContext, Actor) throws -> OrderWrite
    ) {
        let render = render ?? { try detail($0, status: status) }
        r.on(
            method, pattern,
            { request, context in
                let write = try prepare(request, context, try await context.requireActor())
                return try await IdempotentWrite.answer(render) { try await orders.run(write) }
            },
            immediate: { request, context in
                // `nil` (the token needs the store, or the store cannot commit at once): the
                // handler above does it all again on a task; nothing was written.
                guard let actor = try context.actorNow(), let order = try orders.runNow(try prepare(request, context, actor))
                else { return nil }
                return try render(order)
            })
    }

    /// An order as a write's answer, with its `ETag`: the client's next `If-Match` (SPEC §2).
    private static func detail(_ order: Order, status: Int = 200) throws -> HTTPResponse {
        var headers = HTTPHeaders()
        headers.add("etag", Conditional.etag(order))  // the first field: nothing to replace
        return try JSONCoding.response(OrderDetailJSON(order: order), status: status, headers: headers)
    }

    /// Without `--metrics-token`, `/metrics` is for the operator on the machine itself (SPEC §2:
    /// "operator"): a loopback peer, and no `X-Forwarded-For` (a proxy on the machine relaying
    /// someone else). A server bound to a public interface no longer shows its metrics to anyone
    /// who can reach the port (found by a review, 2026-12-03). The `Host` must name this machine
    /// too (`localhost` or a loopback address): a web page whose name was rebound to 127.0.0.1
    /// reached it from the operator's own browser as its own origin (DNS rebinding; found by a
    /// review, 2026-12-04). - Throws: 403.
    static func requireLocal(_ request: HTTPRequest) throws {
        guard ClientAddress.isLoopback(request.remoteAddress), request.headers["x-forwarded-for"] == nil,
            request.headers["host"].map(namesThisMachine) ?? true
        else {
            throw APIError(
                403, "forbidden",
                "/metrics answers only on this machine (a loopback connection, with a Host naming this machine); set --metrics-token to read it from elsewhere."
            )
        }
    }

    /// Whether a `Host` header (`name[:port]`, `[v6][:port]`) names this machine: a loopback address,
    /// `localhost` and its usual aliases (`*.localhost`, `localhost.localdomain`, `ip6-localhost`),
    /// or this machine's own host name (Debian maps it to 127.0.1.1); a trailing dot is ignored.
    static func namesThisMachine(_ host: String) -> Bool {
        var name = Substring(host.lowercased())
        if name.hasPrefix("["), let end = name.firstIndex(of: "]") {
            name = name[name.index(after: name.startIndex)..<end]
        } else if let colon = name.lastIndex(of: ":"), name.firstIndex(of: ":") == colon {
            name = name[..<colon]
        }
        if name.hasSuffix(".") { name = name.dropLast() }
        let text = String(name)
        return ["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"].contains(text)
            || text.hasSuffix(".localhost") || ClientAddress.isLoopback(text) || thisMachinesNames.contains(text)
    }

    /// `gethostname()` and its first label, lower-cased: a local `curl http://$(hostname):8080/metrics`.
    static let thisMachinesNames: Set<String> = {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return [] }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).lowercased()
        guard !name.isEmpty else { return [] }
        return [name, String(name.prefix { $0 != "." })]
    }()

    /// Checks `Authorization: Bearer <expected>`, comparing hashes in constant time (no early exit
    /// that would tell an attacker how much of a guess was right). - Throws: 401.
    private static func requireBearer(_ expected: Secret, in request: HTTPRequest) throws {
        let header = request.headers["authorization"] ?? ""
        guard header.count > 7, header.lowercased().hasPrefix("bearer ") else { throw APIError.unauthenticated }
        let given = Secret(header.dropFirst(7).trimmingCharacters(in: .whitespaces))
        guard ConstantTime.equals(given.hash, expected.hash) else {
            throw APIError(401, "not_authenticated", "The metrics token is wrong.")
        }
    }
}

struct LoginResponse: Encodable {
    let token: String
    let user: UserJSON
}

struct TicketResponse: Encodable {
    let ticket: String
    let expiresIn: Int
    enum CodingKeys: String, CodingKey { case ticket, expiresIn = "expires_in" }
}
