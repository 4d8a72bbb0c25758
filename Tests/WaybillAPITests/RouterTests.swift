import Testing
import WaybillNetwork

@testable import WaybillAPI

/// `Router.match`: trailing and repeated slashes are optional, parameters are bound by name,
/// a known path with another method is 405, anything else 404.
struct RouterTests {
    static let router: Router = {
        var r = Router()
        for (method, pattern) in [
            ("GET", "/"), ("GET", "/api/orders/"), ("POST", "/api/orders/"), ("GET", "/api/orders/{id}/"),
            ("PATCH", "/api/orders/{id}/"), ("POST", "/api/orders/{id}/status"),
        ] {
            r.on(method, pattern) { _, _ in HTTPResponse(status: 204) }
        }
        return r
    }()

    func found(_ method: String, _ path: String) -> (pattern: String, parameters: PathParameters)? {
        guard case .found(let route, let parameters) = Self.router.match(method: method, path: path) else { return nil }
        return (route.pattern, parameters)
    }

    @Test func pathsMatchWithOrWithoutTheirSlashes() {
        for path in ["/api/orders/42/", "/api/orders/42", "api/orders/42", "//api//orders/42//"] {
            #expect(found("PATCH", path)?.pattern == "/api/orders/{id}/", "\(path)")
            #expect(found("PATCH", path)?.parameters == ["id": "42"], "\(path)")
        }
        #expect(found("GET", "/")?.pattern == "/")
        #expect(found("GET", "")?.pattern == "/")
        #expect(found("GET", "/api/orders")?.pattern == "/api/orders/")
        #expect(found("POST", "/api/orders/7/status")?.parameters == ["id": "7"])
        #expect(found("HEAD", "/api/orders/7/")?.pattern == "/api/orders/{id}/")
    }

    @Test func anotherMethodIs405AndAnUnknownPathIs404() {
        guard case .methodNotAllowed(let allowed) = Self.router.match(method: "DELETE", path: "/api/orders/") else {
            Issue.record("expected 405")
            return
        }
        #expect(allowed == ["GET", "POST"])
        for path in ["/api/order/", "/api/orders/1/2/3", "/api/orders/1/status/x"] {
            guard case .notFound = Self.router.match(method: "GET", path: path) else {
                Issue.record("expected 404 for \(path)")
                continue
            }
        }
    }

    /// Segments are split and compared by byte: parameters keep any text as sent, a "/" before a
    /// combining mark still separates (a walk by `Character` took the pair for one character), and
    /// a literal matches only its exact bytes (not a canonically equivalent spelling).
    @Test func pathsAreSplitAndComparedByByte() {
        #expect(found("PATCH", "/api/orders/ünï 🚚/")?.parameters == ["id": "ünï 🚚"])
        #expect(found("PATCH", "/api/orders/\u{301}42/")?.parameters == ["id": "\u{301}42"])
        #expect(Router.split("/a/\u{301}b//c") == ["a", "\u{301}b", "c"])
        guard case .notFound = Self.router.match(method: "GET", path: "/api/orde\u{301}rs/") else {
            Issue.record("a literal matched other bytes")
            return
        }
    }

    /// Routes are tried in the order they were added, also within one segment count: a literal
    /// added before a parameter route of the same length wins, and one added after never does.
    @Test func theFirstAddedOfTwoMatchingRoutesWins() {
        var r = Router()
        r.on("GET", "/api/orders/counts") { _, _ in HTTPResponse(status: 200) }
        r.on("GET", "/api/orders/{id}") { _, _ in HTTPResponse(status: 201) }
        r.on("GET", "/api/orders/latest") { _, _ in HTTPResponse(status: 202) }
        guard case .found(let counts, _) = r.match(method: "GET", path: "/api/orders/counts"),
            case .found(let latest, let parameters) = r.match(method: "GET", path: "/api/orders/latest")
        else {
            Issue.record("expected matches")
            return
        }
        #expect(counts.pattern == "/api/orders/counts")
        #expect(latest.pattern == "/api/orders/{id}")
        #expect(parameters == ["id": "latest"])
    }
}
