import WaybillNetwork

/// Matches `METHOD /path/{param}` patterns; trailing slashes are optional on both sides.
struct Router: Sendable {
    typealias Handler = @Sendable (HTTPRequest, RequestContext) async throws -> HTTPResponse

    struct Route: Sendable {
        var method: String
        /// The pattern as written, e.g. `/api/orders/{id}/status`: also the metrics label.
        var pattern: String
        var segments: [Substring]
        var handler: Handler
    }

    /// What a lookup found.
    enum Match {
        case found(Route, parameters: [String: String])
        /// The path exists, but not for this method.
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    private(set) var routes: [Route] = []

    mutating func on(_ method: String, _ pattern: String, _ handler: @escaping Handler) {
        routes.append(Route(method: method, pattern: pattern, segments: Self.split(pattern), handler: handler))
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
        var allowed: [String] = []
        for route in routes {
            guard let parameters = Self.bind(route.segments, to: parts) else { continue }
            if route.method == method || (method == "HEAD" && route.method == "GET") {
                return .found(route, parameters: parameters)
            }
            allowed.append(route.method)
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }

    /// The non-empty segments between slashes. Into an array sized once: `split(separator:)`
    /// regrew its result two or three times for every request's path.
    private static func split(_ path: String) -> [Substring] {
        var parts: [Substring] = []
        parts.reserveCapacity(8)
        var start = path.startIndex
        for index in path.indices where path[index] == "/" {
            if start < index { parts.append(path[start..<index]) }
            start = path.index(after: index)
        }
        if start < path.endIndex { parts.append(path[start...]) }
        return parts
    }

    private static func bind(_ pattern: [Substring], to parts: [Substring]) -> [String: String]? {
        guard pattern.count == parts.count else { return nil }
        // Literal segments first: most routes tried fail there, before a parameter is copied out
        // (every request tries the routes in order; measured in the write path's profile).
        for (expected, actual) in zip(pattern, parts) where !isParameter(expected) && expected != actual { return nil }
        var parameters: [String: String] = [:]
        for (expected, actual) in zip(pattern, parts) where isParameter(expected) {
            parameters[String(expected.dropFirst().dropLast())] = String(actual)
        }
        return parameters
    }

    private static func isParameter(_ segment: Substring) -> Bool { segment.first == "{" && segment.last == "}" }
}
