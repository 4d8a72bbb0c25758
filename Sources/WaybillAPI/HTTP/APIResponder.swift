import Foundation
import WaybillNetwork
import WaybillObservability
import WaybillStorage

/// Turns requests into responses: route, run the handler, map errors, add headers, log, count.
struct APIResponder: HTTPResponder {
    let router: Router
    let authenticator: Authenticator
    let metrics: Metrics
    let logger: Logger
    /// Where order writes run (`OrderStore.writerExecutor`); `nil` keeps every request on the pool.
    var writerExecutor: (any WriterExecutor)? = nil
    /// Whether an order write may run on the service thread (`start`; `ServerConfiguration.inlineWrites`).
    var inlineWrites = true
    /// The error lines of requests the store could not serve (503 `store_unavailable`): one a
    /// second at most, each saying how many were left out; each request still has its access line.
    var storeFailureLines = LogLineRate()

    /// Order writes run on the store's writer thread when it offers one: the request's code, its
    /// transaction and its answer then take one thread instead of three (`SQLiteWriterExecutor`).
    /// Only these: their work besides the transaction is small and never blocks, while a login
    /// (password hashing is awaited elsewhere, but a flood of them) or a large list read would
    /// hold the writes back.
    ///
    /// Not an order write with a body over `largestInlineBody` (an order's create or edit with
    /// long stages or notes): its parse (about 20 ms for 1 MiB) would hold the writer thread every
    /// company shares. It runs on the pool, and only its transaction goes to the writer.
    func executor(for request: HTTPRequest) -> (any TaskExecutor)? {
        guard Self.isOrderWrite(method: request.method, path: request.path),
            request.body.count <= Self.largestInlineBody
        else { return nil }
        return writerExecutor
    }

    /// An order write that arrives while no other request is running (`alone`) runs on the
    /// service thread, if the SQLite writer is idle (`WriterExecutor.runHere`): no thread is woken
    /// for it. Otherwise — other requests running, or a burst read in one loop pass — it goes to
    /// the writer thread, which commits them together and leaves the service thread to the
    /// sockets. `inlineWrites` turns this off.
    func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void) {
        // A large body is parsed where the handler runs: never on the service thread, which every
        // socket shares (a 1 MiB body takes about 20 ms to parse; a review, 2026-12-05), nor on
        // the writer thread (`executor(for:)`).
        // The executor typed as a writer's, not cast to one per request (a conformance lookup in
        // the runtime, about 1 µs per write).
        if inlineWrites, alone, let writer = writerExecutor, executor(for: request) != nil {
            writer.runHere(start)
        } else {
            start(false)
        }
    }

    /// The largest body an order write run on the service thread may have.
    static let largestInlineBody = 16 << 10

    /// Only an order's create and edit carry a large body (stages, notes): every other route's is
    /// a few fields, and is refused past 16 KiB before it is read. A 1 MiB body to any route (a
    /// login, a status change) was read and parsed whole, about 20 ms each, before it was refused
    /// (a review, 2026-12-05): a cheap way to take a thread's time.
    func bodyLimit(method: String, path: String) -> Int? {
        let parts = Router.split(path)
        let isOrders = parts.count >= 2 && parts[0] == "api" && parts[1] == "orders"
        if isOrders, method == "POST", parts.count == 2 { return nil }  // create
        if isOrders, method == "PATCH", parts.count == 3 { return nil }  // edit
        return HTTPServerConfiguration.bodyBytesAlwaysAllowed
    }

    static func isOrderWrite(method: String, path: String) -> Bool {
        guard method == "POST" || method == "PATCH" || method == "DELETE" else { return false }
        // Bytes compared, not characters: `hasPrefix` checked grapheme boundaries on every request.
        // A byte past the prefix that is not ASCII may start a combining mark, which `hasPrefix`
        // took as another character (`orders` + U+0301 is not `orders`): not an order write either.
        let prefix = "/api/orders".utf8, bytes = path.utf8
        guard bytes.starts(with: prefix) else { return false }
        let next = bytes.index(bytes.startIndex, offsetBy: prefix.count)
        return next == bytes.endIndex || bytes[next] < 0x80
    }

    func respond(to request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        let routeLabel = "unmatched"
        var userID = "-"
        var response: HTTPResponse
        switch router.match(method: request.method, path: request.path) {
        case .found(let route, let parameters):
            let context = RequestContext(parameters: parameters, request: request, authenticator: authenticator)
            return await respond(to: request, route, context, started: started)
        case .methodNotAllowed(let allowed):
            // SPEC §2: 401 for a missing or bad token on every `/api/` call but the login, so the
            // token is checked before a 405 there (it was answered to anyone).
            let context = RequestContext(parameters: [:], request: request, authenticator: authenticator)
            do {
                if Self.needsToken(request.path) { _ = try await context.requireUser() }
                let methods = Self.allowHeader(allowed)
                response = JSONCoding.error(APIError(405, "method_not_allowed", "Use \(methods) here."))
                response.headers.set("Allow", methods)
            } catch {
                response = failure(error, request)
            }
            userID = context.loggedUserID
        case .notFound:
            response = JSONCoding.error(APIError(404, "not_found", "No such route."))
        }
        return finish(response, request, route: routeLabel, user: userID, started: started)
    }

    /// A matched route's answer through its handler, on the request's task.
    private func respond(
        to request: HTTPRequest, _ route: Router.Route, _ context: RequestContext, started: ContinuousClock.Instant
    ) async -> HTTPResponse {
        let response: HTTPResponse
        do {
            response = try await route.handler(request, context)
        } catch {
            response = failure(error, request)
        }
        return finish(response, request, route: route.pattern, user: context.loggedUserID, started: started)
    }

    /// An order write answered on the calling thread, without a task (`Router.ImmediateHandler`):
    /// only while that thread runs the idle SQLite writer's work (`start`, `WriterExecutor.runHere`),
    /// and not under an `Idempotency-Key` (its claim is a store write of its own, which
    /// `IdempotencyGuard` awaits). Measured side by side at 1 000 writes/s: about 16 µs less of a
    /// write's 210 without the task, its executor preference and the store's continuation
    /// (docs/BENCHMARKS.md, 2026-12-07 08:36–). The answer, its headers, metrics and access line
    /// are `respond(to:)`'s.
    func respondNow(to request: HTTPRequest) -> ImmediateResponse? {
        let started = ContinuousClock.now
        guard (request.headers["idempotency-key"] ?? "").isEmpty,
            case .found(let route, let parameters) = router.match(method: request.method, path: request.path),
            let immediate = route.immediate
        else { return nil }
        let context = RequestContext(parameters: parameters, request: request, authenticator: authenticator)
        let response: HTTPResponse
        do {
            guard let answered = try immediate(request, context) else {
                // The token needs the store, or the write cannot commit at once: the handler goes
                // on from the start, on a task, with what the context holds (a user it admitted).
                return .later { await respond(to: request, route, context, started: started) }
            }
            response = answered
        } catch {
            response = failure(error, request)
        }
        return .answered(
            finish(response, request, route: route.pattern, user: context.loggedUserID, started: started, withoutTask: true))
    }

    /// The common end of every answer: headers, the request's metrics and its access line.
    private func finish(
        _ answer: HTTPResponse, _ request: HTTPRequest, route routeLabel: String, user userID: String,
        started: ContinuousClock.Instant, withoutTask: Bool = false
    ) -> HTTPResponse {
        var response = answer
        // A HEAD answer keeps its body here: the network layer sends GET's headers (its
        // Content-Length too, RFC 9110 §9.3.2) and leaves the body out. Emptied here, every HEAD
        // said `Content-Length: 0` (found by an audit, 2026-12-05).
        if response.status == 401, response.headers["www-authenticate"] == nil {
            response.headers.set("WWW-Authenticate", "Bearer")  // RFC 6750 §3
        }
        Self.addCommonHeaders(&response)
        let elapsed = ContinuousClock.now - started
        metrics.recordRequest(route: routeLabel, status: response.status, duration: elapsed, withoutTask: withoutTask)
        let seconds = elapsed / .seconds(1)
        logger.info("request", [
            "method": request.method, "path": Redaction.redactedTarget(path: request.path, query: request.query),
            "status": "\(response.status)", "duration_ms": Self.milliseconds(seconds), "user_id": userID,
        ])
        return response
    }

    /// Every `/api/` path but the login needs a token (SPEC §2).
    static func needsToken(_ path: String) -> Bool {
        path.hasPrefix("/api/") && Router.split(path) != ["api", "auth", "login"]
    }

    /// The methods of the routes that matched the path, each once, with `HEAD` beside `GET` (the
    /// router answers HEAD with the GET route): `POST /api/orders/counts` listed `GET` twice.
    static func allowHeader(_ methods: [String]) -> String {
        var seen: [String] = []
        for method in methods where !seen.contains(method) {
            seen.append(method)
            if method == "GET", !methods.contains("HEAD") { seen.append("HEAD") }
        }
        return seen.joined(separator: ", ")
    }

    private func failure(_ error: any Error, _ request: HTTPRequest) -> HTTPResponse {
        let api = APIError(error)
        if api.code == "store_unavailable" {
            // An outage fails every request alike: one line a second tells it (`storeFailureLines`).
            if let left = storeFailureLines.admit() {
                logger.error("request failed", [
                    "path": Redaction.loggedPath(request.path), "error": String(describing: type(of: error)), "detail": "\(error)",
                    "similar_not_logged": "\(left)",
                ])
            }
        } else if api.isServerFault {
            logger.error("request failed", ["path": Redaction.loggedPath(request.path), "error": String(describing: type(of: error)), "detail": "\(error)"])
        }
        var response = JSONCoding.error(api)
        if let seconds = api.retryAfter { response.headers.set("Retry-After", "\(seconds)") }
        return response
    }

    /// `seconds` as milliseconds with two decimals (`"1.50"`), without `String(format:)`, which goes
    /// through CoreFoundation's formatter on every request.
    static func milliseconds(_ seconds: Double) -> String {
        let hundredths = Int((max(0, seconds) * 100_000).rounded())
        let fraction = hundredths % 100
        return "\(hundredths / 100)." + (fraction < 10 ? "0" : "") + "\(fraction)"
    }

    private static func addCommonHeaders(_ response: inout HTTPResponse) {
        // Names in lower case, as `HTTPHeaders` stores them (and sends them): nothing to convert.
        response.headers.set("x-content-type-options", "nosniff")
        if response.headers["cache-control"] == nil { response.headers.set("cache-control", "no-cache, private") }
        if response.headers["content-security-policy"] == nil {
            response.headers.set("content-security-policy", "default-src 'none'; frame-ancestors 'none'")
        }
    }
}

extension HTTPResponse {
    /// The answer with `Cache-Control: no-store`: for answers that carry a credential (a login's
    /// token, a socket ticket). Every other API answer is `no-cache, private`, which still lets a
    /// client with a disk cache keep it; a bearer token must not land on a disk that way.
    func notStored() -> HTTPResponse {
        var response = self
        response.headers.set("cache-control", "no-store")
        return response
    }
}
