import WaybillDomain
import WaybillNetwork

/// `ETag` / `If-None-Match`: an unchanged list or order costs a 304 with no body.
enum Conditional {
    /// An order's tag changes with every write, because every write bumps `version`.
    static func etag(_ order: Order) -> String { "\"o\(order.id ?? OrderID(0))-v\(order.version)\"" }

    /// A tag over the exact response bytes (FNV-1a 64): lists have no single version.
    static func etag(bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        return "\"l" + String(hash, radix: 16) + "\""
    }

    /// The JSON response, or 304 when the request's `If-None-Match` already names its tag.
    ///
    /// `extra` headers (a list page's `Link`) go on both answers and into a computed tag, so a
    /// cached page is only reused while its next-page link is the same too.
    static func response<T: Encodable>(
        _ value: T, for request: HTTPRequest, etag: String? = nil, extra: [(String, String)] = []
    ) throws -> HTTPResponse {
        var response = try JSONCoding.response(value)
        let tag = etag ?? Self.etag(bytes: response.body + extra.flatMap { Array("\n\($0.0): \($0.1)".utf8) })
        response.headers.set("ETag", tag)
        for (name, value) in extra { response.headers.set(name, value) }
        if let wanted = request.headers["if-none-match"], matches(wanted, tag) {
            var headers = HTTPHeaders()
            headers.set("ETag", tag)
            for (name, value) in extra { headers.set(name, value) }
            return HTTPResponse(status: 304, headers: headers)
        }
        return response
    }

    private static func matches(_ header: String, _ tag: String) -> Bool {
        header.split(separator: ",").contains { candidate in
            let trimmed = candidate.trimmingCharacters(in: .whitespaces)
            return trimmed == "*" || trimmed == tag || trimmed == "W/" + tag
        }
    }
}

import Foundation
