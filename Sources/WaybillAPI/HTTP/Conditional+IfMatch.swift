import Foundation
import WaybillNetwork

extension Conditional {
    /// The request's `If-Match` and `If-Order-Created` as an order precondition.
    ///
    /// Accepts `*` or a comma-separated list of entity tags (RFC 9110 §13.1.1). Weak tags
    /// (`W/"…"`) are read but never match: `If-Match` compares strongly, and an order's tag is
    /// always strong. A header that is neither is a client bug, answered `400 invalid_header`
    /// rather than treated as "does not match": a 412 would send the client refetching and
    /// retrying a request that can never succeed.
    /// - Throws: `APIError` 400 `invalid_header`.
    static func ifMatch(_ request: HTTPRequest) throws -> OrderPrecondition {
        var precondition = OrderPrecondition.none
        if let header = request.headers["if-match"] {
            guard let version = parseIfMatch(header) else {
                throw APIError(400, "invalid_header", #"If-Match must be * or quoted ETags, e.g. If-Match: "o42-v7"."#)
            }
            precondition.version = version
        }
        if let header = request.headers["if-order-created"], !header.allSatisfy({ $0 == " " || $0 == "\t" }) {
            guard let millis = parseMilliseconds(header) else {
                throw APIError(
                    400, "invalid_header",
                    "If-Order-Created must be the order's created_at in milliseconds since 1970, e.g. If-Order-Created: 1764910042123.")
            }
            precondition.createdAt = millis
        }
        return precondition
    }

    /// A whole number of milliseconds (an optional minus and at most 18 digits), `nil` otherwise.
    static func parseMilliseconds(_ header: String) -> Int64? {
        let value = header.trimmingCharacters(in: .whitespaces)
        let digits = value.hasPrefix("-") ? value.dropFirst() : Substring(value)
        guard (1...18).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
        return Int64(value)
    }

    /// `nil` for a malformed value.
    static func parseIfMatch(_ header: String) -> OrderPrecondition.Version? {
        let value = header.trimmingCharacters(in: .whitespaces)
        if value == "*" { return .anyExisting }
        var strong: [String] = []
        var sawTag = false
        var rest = Substring(value)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" }
            if rest.isEmpty { break }
            if rest.first == "," {  // empty list elements are allowed (RFC 9110 §5.6.1)
                rest = rest.dropFirst()
                continue
            }
            let isWeak = rest.hasPrefix("W/")
            if isWeak { rest = rest.dropFirst(2) }
            guard rest.first == "\"", let close = rest.dropFirst().firstIndex(of: "\"") else { return nil }
            let tag = rest[rest.startIndex...close]
            // etagc: visible ASCII except the quote (obs-text is never produced by this server).
            guard tag.dropFirst().dropLast().unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value <= 0x7E }) else {
                return nil
            }
            sawTag = true
            if !isWeak { strong.append(String(tag)) }
            rest = rest[rest.index(after: close)...].drop { $0 == " " || $0 == "\t" }
            guard rest.isEmpty || rest.first == "," else { return nil }
        }
        return sawTag ? .oneOf(strong) : nil
    }
}
