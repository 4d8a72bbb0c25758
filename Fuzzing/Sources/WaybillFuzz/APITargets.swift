import Foundation
@testable import WaybillAPI
import WaybillDomain
import WaybillNetwork
import WaybillStorage

extension FuzzTarget {
    /// Whole requests through the API pipeline in-process (router, authentication, JSON bodies,
    /// query and header parsing, validation, the store), as `FuzzRequest` reads them.
    ///
    /// Checks: never a 5xx other than 503, and every error is the SPEC's JSON
    /// (`{"error": …, "message": …}`).
    static let apiRequest = FuzzTarget(name: "api-request", summary: "REST requests through the whole API") { input in
        let fixture = ServerFixture.shared
        let request = FuzzRequest.read(&input, fixture: fixture)
        let responder = fixture.responder
        let response = blocking { await responder.respond(to: request) }
        FuzzCheck.expect(
            response.status < 500 || response.status == 503,
            "\(response.status) for \(request.method) \(request.path): \(String(decoding: response.body, as: UTF8.self))")
        if response.status >= 400 && request.method != "HEAD" {
            let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any]
            FuzzCheck.expect(object?["error"] is String, "error \(response.status) without a JSON error body")
        }
        if request.method == "POST" && response.status == 204 { blocking { await fixture.renewTokens() } }
    }

    /// Route matching: line 1 the method, the rest the path, against the real route table.
    ///
    /// Checks: a match binds every segment (literal equal, parameter captured as is); "method not
    /// allowed" never lists the method asked for.
    static let router = FuzzTarget(name: "router", summary: "route matching") { input in
        let method = input.line()
        let path = input.restText()
        switch ServerFixture.shared.responder.router.match(method: method, path: path) {
        case .found(let route, let parameters):
            // Paths are split and compared by byte (a "/" is a separator even before a combining mark).
            let parts = path.utf8.split(separator: UInt8(ascii: "/")).map { String(decoding: $0, as: UTF8.self) }
            FuzzCheck.expect(parts.count == route.segments.count, "\(path) matched \(route.pattern)")
            for (segment, part) in zip(route.segments, parts) {
                switch segment {
                case .parameter(let name):
                    FuzzCheck.expect(parameters[name].map { Array($0.utf8) } == Array(part.utf8), "bad binding")
                case .literal(let text):
                    FuzzCheck.expect(Array(text.utf8) == Array(part.utf8), "\(path) matched \(route.pattern)")
                }
            }
            FuzzCheck.expect(route.method == method || (method == "HEAD" && route.method == "GET"), "wrong method")
        case .methodNotAllowed(let allowed):
            FuzzCheck.expect(!allowed.isEmpty && !allowed.contains(method), "\(method) refused but allowed")
        case .notFound:
            break
        }
    }

    /// `GET /api/orders/` query strings (`OrderListRequest`): one `name=value` per line.
    ///
    /// Checks: what parses is within the documented bounds, and the next-page link is built.
    static let orderListQuery = FuzzTarget(name: "order-list-query", summary: "order list query strings") { input in
        var query: [(name: String, value: String)] = []
        while !input.isEmpty { query.append(FuzzRequest.pair(input.line())) }
        let request = HTTPRequest(method: "GET", path: "/api/orders/", query: query)
        guard let parsed = try? OrderListRequest.parse(request) else { return }
        FuzzCheck.expect((1...OrderListRequest.maximumLimit).contains(parsed.limit), "limit \(parsed.limit)")
        FuzzCheck.expect((parsed.ids?.count ?? 0) <= OrderListRequest.maximumIDs, "too many ids")
        FuzzCheck.expect((parsed.text?.count ?? 0) <= OrderListRequest.maximumTextLength, "q too long")
        _ = OrderListRequest.nextLink(for: request, page: .init(rows: [], next: parsed.before ?? .init(1)))
    }

    /// `If-Match` headers (`Conditional.parseIfMatch`): the whole input is the header value.
    static let ifMatch = FuzzTarget(name: "if-match", summary: "If-Match headers") { input in
        let header = input.restText()
        guard case .oneOf(let tags)? = Conditional.parseIfMatch(header) else { return }
        for tag in tags { FuzzCheck.expect(tag.count >= 2 && tag.hasPrefix("\"") && tag.hasSuffix("\""), "tag \(tag)") }
    }

    /// JSON request bodies: byte 1 picks the body type, the rest is the body; what decodes is
    /// validated as the handlers do.
    static let jsonBodies = FuzzTarget(name: "json-bodies", summary: "JSON request bodies and their validation") { input in
        let kind = input.byte() % 6
        let request = HTTPRequest(method: "POST", path: "/", body: input.rest())
        switch kind {
        case 0:
            guard let body = try? JSONCoding.decode(CreateOrderRequest.self, from: request) else { return }
            _ = try? Validation.title(body.title)
            _ = try? body.notes.map(Validation.notes)
            _ = try? body.stages.map(Validation.stages)
        case 1:
            guard let body = try? JSONCoding.decode(PatchOrderRequest.self, from: request) else { return }
            _ = try? body.title.map(Validation.title)
            _ = try? body.notes.map(Validation.notes)
            if let stages = body.stages, let valid = try? Validation.stages(stages) {
                FuzzCheck.expect(valid.count == stages.count, "stages lost")
            }
        case 2: _ = try? JSONCoding.decode(StatusRequest.self, from: request)
        case 3: _ = try? JSONCoding.decode(AssignRequest.self, from: request)
        case 4:
            guard let body = try? JSONCoding.decode(DocumentRequest.self, from: request) else { return }
            _ = try? Validation.document(body, at: Date(timeIntervalSince1970: 0))
        default: _ = try? JSONCoding.decode(LoginRequest.self, from: request)
        }
    }
}
