import Foundation

/// Header fields with case-insensitive names, in arrival order.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    /// The fields in arrival order; names are lower-case.
    public private(set) var fields: [(name: String, value: String)] = []

    /// Headers from `(name, value)` pairs, names lower-cased.
    public init(_ fields: [(String, String)] = []) {
        for (name, value) in fields { add(name, value) }
    }

    /// The first value of `name` (any case), or `nil`.
    public subscript(_ name: String) -> String? {
        let key = Self.lowercased(name)
        return fields.first { $0.name == key }?.value
    }

    /// Appends a field; the name is stored lower-cased.
    public mutating func add(_ name: String, _ value: String) {
        reserveForFirstField()
        fields.append((Self.lowercased(name), value))
    }

    /// Replaces every field named `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        let key = Self.lowercased(name)
        // Not on an empty list: `removeAll(where:)` made the shared empty array a buffer of its own
        // first, one allocation more per answer before `reserveForFirstField` made another.
        // Nor when no field has the name (most sets): `removeAll(where:)` takes the buffer for writing
        // (a uniqueness check, its copy if shared) and walks it even when it removes nothing.
        if fields.contains(where: { $0.name == key }) { fields.removeAll { $0.name == key } }
        reserveForFirstField()
        fields.append((key, value))
    }

    /// Requests and answers carry four to eight fields: room for eight at once, not regrown from one.
    private mutating func reserveForFirstField() {
        if fields.capacity == 0 { fields.reserveCapacity(8) }
    }

    /// `name.lowercased()`, without its cost for the names every request and answer carry.
    ///
    /// Why: `String.lowercased()` looks up Unicode properties per character and allocates a new
    /// string for any name longer than 15 bytes (`x-content-type-options`), and each request reads
    /// and each answer sets several headers (docs/BENCHMARKS.md, 2026-12-03: allocations per
    /// write). A name already in lower-case ASCII is returned as it is; ASCII is lower-cased by
    /// byte; anything else goes through `lowercased()`.
    static func lowercased(_ name: String) -> String {
        // Over the string's bytes in place (`withUTF8`): a loop over `name.utf8` went through the
        // view's iterator unspecialized, a call per byte, for every header name of every request
        // and answer (about 0.5 % of a write's CPU, docs/BENCHMARKS.md 2026-12-07).
        var text = name
        let (upper, ascii) = text.withUTF8 { bytes -> (Bool, Bool) in
            var upper = false
            for byte in bytes {
                if byte >= 0x80 { return (upper, false) }
                if byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") { upper = true }
            }
            return (upper, true)
        }
        if !ascii { return name.lowercased() }
        guard upper else { return name }
        return String(unsafeUninitializedCapacity: name.utf8.count) { out in
            for (index, byte) in name.utf8.enumerated() {
                out[index] = byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
            }
            return name.utf8.count
        }
    }

    /// Iterates `fields` in order.
    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    /// Same fields in the same order.
    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.elementsEqual(rhs.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

/// One HTTP request as the application sees it: lws and its callbacks stay inside `WaybillNetwork`.
public struct HTTPRequest: Sendable {
    /// Upper-case method: `GET`, `POST`, `PATCH`, `DELETE`, …
    public var method: String
    /// The path without the query string, e.g. `/api/orders/42/`.
    public var path: String
    /// Query arguments, URL-decoded, in order.
    public var query: [(name: String, value: String)]
    /// The request headers the server reads (see `HTTPServer` docs for the list).
    public var headers: HTTPHeaders
    /// The body, complete (de-chunked), at most `maxBodyBytes`.
    public var body: [UInt8]
    /// Peer address, for logs.
    public var remoteAddress: String
    /// The request arrived after the server began to stop, on a connection kept from before
    /// (`HTTPServerConfiguration.idleConnectionDrain`): it is answered, but a readiness check
    /// should say no (a health checker must not take a stopping node for a ready one).
    public var arrivedWhileStopping = false

    /// Makes a request (tests and other transports build them too).
    public init(
        method: String, path: String, query: [(name: String, value: String)] = [], headers: HTTPHeaders = HTTPHeaders(),
        body: [UInt8] = [], remoteAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The first value of query argument `name`.
    public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
}

/// One HTTP response. The server adds `Content-Length` and `Connection` itself.
public struct HTTPResponse: Sendable {
    /// The status code. 204, 304 and 1xx responses go out without a body.
    public var status: Int
    /// Headers to send as given (content-type, etag, cache-control, CSP, …). `Content-Length`,
    /// `Connection` and `Transfer-Encoding` are the server's and are ignored here.
    public var headers: HTTPHeaders
    /// The body, sent with a `Content-Length`.
    public var body: [UInt8]

    /// Makes a response.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON error in the SPEC's shape: `{"error": code, "message": message}`. With `nosniff`: the
    /// network layer's own answers (400, 408, 411, 413) go out without the API's common headers.
    public static func jsonError(status: Int, code: String, message: String) -> HTTPResponse {
        let payload = ["error": code, "message": message]
        let body = (try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])) ?? Data()
        return HTTPResponse(
            status: status,
            headers: HTTPHeaders([("Content-Type", "application/json"), ("X-Content-Type-Options", "nosniff")]),
            body: Array(body))
    }
}

/// What `HTTPResponder.respondNow` gives: the answer, or the rest of the work, to finish on a task
/// (on the responder's executor for the request) whose value is the answer.
public enum ImmediateResponse: Sendable {
    case answered(HTTPResponse)
    case later(@Sendable () async -> HTTPResponse)
}

/// Answers HTTP requests. `respond(to:)` is called on Swift tasks, never on the service thread, so it
/// may await the store; `respondNow(to:)`, only inside `start`'s `start(true)`, on the thread running it.
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest) async -> HTTPResponse

    /// The executor `respond(to:)` should run on for this request, or `nil` for Swift's global pool.
    /// Called on the service thread before the task starts: it must be quick.
    func executor(for request: HTTPRequest) -> (any TaskExecutor)?

    /// Starts the request's task: `start` creates it on `executor(for:)`, at once on the calling
    /// thread when given `true` (`Task.immediate`: it runs there until it first suspends), queued
    /// on its executor when given `false`. Called on the service thread; `alone` when no other
    /// request is running (`ServerCore.isAlone`: every other dispatched request has its answer
    /// already, and at most one was answered inline in this loop pass). A responder whose
    /// executor can run the task on the calling thread without blocking may do so (`APIResponder`:
    /// an order write on an idle SQLite writer, `WriterExecutor.runHere`).
    func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void)

    /// The answer to `request` given on the calling thread, without a task, or the rest of it to
    /// run on one (`later`); `nil` to start the task as usual. Asked only inside `start` when it
    /// passes `true` (the thread may run the responder's work at once), before any task exists.
    func respondNow(to request: HTTPRequest) -> ImmediateResponse?

    /// The largest body `method` `path` may have, when it is below the server's `maxBodyBytes`
    /// (`nil`: that one). Asked on the service thread at the request's head, only for a body that
    /// may be larger than `HTTPServerConfiguration.bodyBytesAlwaysAllowed` (a length above it, or
    /// chunked), so it costs the usual small request nothing. Past it: 413 before the body is read.
    func bodyLimit(method: String, path: String) -> Int?
}

extension HTTPResponder {
    /// Every request on the global pool.
    public func executor(for request: HTTPRequest) -> (any TaskExecutor)? { nil }

    /// Only starts the task, on its executor.
    public func start(_ request: HTTPRequest, alone: Bool, _ start: (_ immediately: Bool) -> Void) { start(false) }

    /// Never without a task.
    public func respondNow(to request: HTTPRequest) -> ImmediateResponse? { nil }

    /// The server's `maxBodyBytes` for every request.
    public func bodyLimit(method: String, path: String) -> Int? { nil }
}
