import Foundation
import WaybillNetwork

/// The web panel's files (`Web/`), loaded once at start and served with strict security headers.
struct StaticFiles: Sendable {
    private struct File: Sendable {
        var body: [UInt8]
        var contentType: String
        var etag: String
    }
    private let files: [String: File]

    /// Content-Security-Policy for every page: no inline script, no foreign origin. WebSockets go
    /// to this host only: CSP 3 browsers match `ws:`/`wss:` to `'self'`, and older ones get the
    /// exact `ws://host` / `wss://host` (never a bare `ws:` scheme, which allowed any host).
    static func contentSecurityPolicy(host: String?) -> String {
        var connect = "'self'"
        if let host = host.flatMap(Self.safeHost) { connect += " ws://\(host) wss://\(host)" }
        return "default-src 'self'; connect-src \(connect); img-src 'self' data:; style-src 'self'; script-src 'self'; "
            + "frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
    }

    /// `host[:port]` when it is made of host-name characters only (IPv6 in brackets allowed), so a
    /// forged `Host` header cannot add sources or directives to the policy.
    static func safeHost(_ host: String) -> String? {
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]")
        guard !host.isEmpty, host.count <= 255, host.allSatisfy(allowed.contains) else { return nil }
        return host.lowercased()
    }

    /// Loads `index.html` and every file of `assets/` under `directory`.
    init(directory: URL?) {
        var files: [String: File] = [:]
        if let directory {
            let manager = FileManager.default
            var candidates = [("index.html", directory.appendingPathComponent("index.html"))]
            let assets = directory.appendingPathComponent("assets")
            for name in (try? manager.contentsOfDirectory(atPath: assets.path)) ?? [] {
                candidates.append((name, assets.appendingPathComponent(name)))
            }
            for (name, url) in candidates {
                guard let data = try? Data(contentsOf: url) else { continue }
                let bytes = Array(data)
                files[name] = File(body: bytes, contentType: Self.contentType(of: name), etag: Conditional.etag(bytes: bytes))
            }
        }
        self.files = files
    }

    /// The bundled `Web` folder of this module.
    static var bundled: URL? { Bundle.module.url(forResource: "Web", withExtension: nil) }

    func response(for name: String, request: HTTPRequest) -> HTTPResponse {
        guard !name.contains("/"), !name.hasPrefix("."), let file = files[name] else {
            return HTTPResponse.jsonError(status: 404, code: "not_found", message: "No such file.")
        }
        var headers = HTTPHeaders()
        headers.set("Content-Type", file.contentType)
        headers.set("ETag", file.etag)
        headers.set("Cache-Control", "no-cache")
        headers.set("Content-Security-Policy", Self.contentSecurityPolicy(host: request.headers["host"]))
        headers.set("Referrer-Policy", "no-referrer")
        // CSP's frame-ancestors is the rule; browsers that predate it read only this one.
        headers.set("X-Frame-Options", "DENY")
        if request.headers["if-none-match"] == file.etag { return HTTPResponse(status: 304, headers: headers) }
        return HTTPResponse(status: 200, headers: headers, body: file.body)
    }

    private static func contentType(of name: String) -> String {
        switch name.split(separator: ".").last ?? "" {
        case "html": "text/html; charset=utf-8"
        case "js", "mjs": "text/javascript; charset=utf-8"
        case "css": "text/css; charset=utf-8"
        case "svg": "image/svg+xml"
        case "png": "image/png"
        case "ico": "image/x-icon"
        case "json", "webmanifest": "application/json"
        default: "application/octet-stream"
        }
    }
}
