import WaybillNetwork

/// Matches `METHOD /path/{param}` patterns; trailing slashes are optional on both sides.
struct Router: Sendable {
    typealias Handler = @Sendable (HTTPRequest, RequestContext) async throws -> HTTPResponse
    /// The same answer as the route's `Handler`, given without a task when it can be
    /// (`APIResponder.respondNow`); `nil` when it needs one: `Handler` then finishes the request
    /// with the same `RequestContext` (a user it admitted stays admitted).
    typealias ImmediateHandler = @Sendable (HTTPRequest, RequestContext) throws -> HTTPResponse?

    struct Route: Sendable {
        var method: String
        /// The pattern as written, e.g. `/api/orders/{id}/status`: also the metrics label.
        var pattern: String
        var segments: [Segment]
        var handler: Handler
        /// For the order writes (`Routes.orderWrite`); nil elsewhere.
        var immediate: ImmediateHandler? = nil
    }

    /// One segment of a pattern, parsed once when the route is added.
    enum Segment: Sendable, Equatable {
        case literal(String)
        /// `{name}`: binds whatever segment stands there.
        case parameter(name: String)

        init(_ text: Substring) {
            if text.count >= 2, text.first == "{", text.last == "}" {
                self = .parameter(name: String(text.dropFirst().dropLast()))
            } else {
                self = .literal(String(text))
            }
        }
    }

    /// What a lookup found.
    enum Match {
        case found(Route, parameters: PathParameters)
        /// The path exists, but not for this method.
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private(set) var routes: [Route] = []
    /// Indices into `routes` by segment count, in the order added: a path is tried only against
    /// the routes it could match (copying every route out of the array to look at it showed in
    /// the write path's profile).
    private var bySegmentCount: [Int: [Int]] = [:]

    mutating func on(_ method: String, _ pattern: String, _ handler: @escaping Handler, immediate: ImmediateHandler? = nil) {
        let segments = Self.split(pattern).map(Segment.init)
        // `PathParameters` finds a name's first value: a pattern names each parameter once.
        let names = segments.compactMap { if case .parameter(let name) = $0 { name } else { nil } }
        precondition(Set(names).count == names.count, "a route pattern names a parameter twice: \(pattern)")
        bySegmentCount[segments.count, default: []].append(routes.count)
        routes.append(Route(method: method, pattern: pattern, segments: segments, handler: handler, immediate: immediate))
    }

    /// Replaces the handler of every route for which `applies(method, pattern)` holds with
    /// `wrap(handler)` (e.g. `IdempotencyGuard` around the order writes).
    mutating func wrapHandlers(
        where applies: (_ method: String, _ pattern: String) -> Bool, _ wrap: (@escaping Handler) -> Handler
    ) {
        for index in routes.indices where applies(routes[index].method, routes[index].pattern) {
            routes[index].handler = wrap(routes[index].handler)
        }
    }

    func match(method: String, path: String) -> Match {
        let parts = Self.split(path)
        let candidates = bySegmentCount[parts.count] ?? []
        // The method first, then the path: the parameters are copied out only for the route that
        // answers, and the list of allowed methods is made only when none does (a PATCH of an
        // order was bound to its GET route first, then to its own, and listed GET as allowed).
        for index in candidates where Self.answers(method, routes[index].method) {
            if let parameters = Self.bind(routes[index].segments, to: parts) {
                return .found(routes[index], parameters: parameters)
            }
        }
        let allowed = candidates.filter { Self.literalsMatch(routes[$0].segments, parts) }.map { routes[$0].method }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    /// Whether a route for `routeMethod` answers a request with `method` (a GET route answers HEAD).
    private static func answers(_ method: String, _ routeMethod: String) -> Bool {
        routeMethod == method || (method == "HEAD" && routeMethod == "GET")
    }

    /// The non-empty segments between slashes, found by byte: a walk over the path's `Character`s
    /// cost a grapheme-break lookup per character, on every request (the write path's profile).
    /// Into an array sized once: `split(separator:)` regrew its result two or three times.
    static func split(_ path: String) -> [Substring] {
        var parts: [Substring] = []
        parts.reserveCapacity(8)
        let bytes = path.utf8
        var start = bytes.startIndex
        var index = start
        while index != bytes.endIndex {
            if bytes[index] == UInt8(ascii: "/") {
                if start < index { parts.append(path[start..<index]) }
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        if start < bytes.endIndex { parts.append(path[start...]) }
        return parts
    }

    /// Whether `parts` has `pattern`'s length and literal segments (by byte).
    private static func literalsMatch(_ pattern: [Segment], _ parts: [Substring]) -> Bool {
        guard pattern.count == parts.count else { return false }
        for (segment, actual) in zip(pattern, parts) {
            if case .literal(let text) = segment, !text.utf8.elementsEqual(actual.utf8) { return false }
        }
        return true
    }

    /// The parameters `parts` binds to `pattern`, or nil if a literal segment differs. Literals
    /// compare by byte (a URL's path is bytes, and a route's literals are ASCII), and all of them
    /// before a parameter is copied out: most routes tried fail there.
    private static func bind(_ pattern: [Segment], to parts: [Substring]) -> PathParameters? {
        guard literalsMatch(pattern, parts) else { return nil }
        var parameters = PathParameters()
        for (segment, actual) in zip(pattern, parts) {
            if case .parameter(let name) = segment { parameters.pairs.append((name, String(actual))) }
        }
        return parameters
    }
}

/// A matched route's path parameters by name: a route has one or two, so a list looked through
/// beats a dictionary, which hashed every name and value into a new table per request (the write
/// path's profile, docs/BENCHMARKS.md). Names are unique within a pattern.
struct PathParameters: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    fileprivate(set) var pairs: [(name: String, value: String)] = []

    init() {}

    init(dictionaryLiteral elements: (String, String)...) {
        pairs = elements.map { (name: $0.0, value: $0.1) }
    }

    subscript(name: String) -> String? {
        pairs.first { $0.name == name }?.value
    }

    static func == (lhs: PathParameters, rhs: PathParameters) -> Bool {
        lhs.pairs.count == rhs.pairs.count && lhs.pairs.allSatisfy { rhs[$0.name] == $0.value }
    }
}
