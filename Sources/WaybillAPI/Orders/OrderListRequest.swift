import Foundation
import WaybillDomain
import WaybillNetwork
import WaybillStorage

/// `GET /api/orders/`'s query string as an `OrderQuery`, and the `Link` to its next page.
///
/// Every bad value is a 400 naming the argument: a client that mistypes a filter must not get a
/// silently unfiltered (and possibly huge) answer.
enum OrderListRequest {
    static let defaultLimit = 100
    static let maximumLimit = 500
    static let maximumIDs = 100
    static let maximumTextLength = 100

    /// The query of `request` (the driver scope is the service's job, not this parser's).
    /// - Throws: 400 `invalid_field` for an unknown status, a limit outside 1…500, more than 100
    ///   ids, a malformed id, date or boolean.
    static func parse(_ request: HTTPRequest) throws -> OrderQuery {
        var query = OrderQuery(limit: defaultLimit)
        for (name, value) in request.query {
            switch name {
            case "status":
                // Repeatable, and a comma list is accepted too (`status=new,assigned`).
                for text in value.split(separator: ",", omittingEmptySubsequences: false) {
                    query.statuses.insert(try status(String(text)))
                }
            case "limit":
                guard let limit = Int(value), (1...maximumLimit).contains(limit) else {
                    throw invalid("limit must be an integer from 1 to \(maximumLimit).")
                }
                query.limit = limit
            case "driver_id": query.driver = UserID(try positiveID(value, name))
            case "before": query.before = OrderID(try positiveID(value, name))
            case "active":
                switch value {
                case "true", "1": query.activeOnly = true
                case "false", "0": query.activeOnly = false
                default: throw invalid("active must be true or false.")
                }
            case "q":
                guard value.count <= maximumTextLength else {
                    throw invalid("q must be at most \(maximumTextLength) characters.")
                }
                query.text = value.isEmpty ? nil : value
            case "updated_after":
                guard let date = Timestamp.parse(value) else {
                    throw invalid("updated_after must be an ISO 8601 timestamp, e.g. 2026-12-01T00:00:00Z.")
                }
                query.updatedAfter = date
            case "ids":
                let parts = value.split(separator: ",", omittingEmptySubsequences: false)
                guard parts.count <= maximumIDs else { throw invalid("ids takes at most \(maximumIDs) ids.") }
                let ids = try parts.map { OrderID(try positiveID(String($0), name)) }
                let all = (query.ids ?? []) + ids
                guard all.count <= maximumIDs else { throw invalid("ids takes at most \(maximumIDs) ids.") }
                query.ids = all
            default:
                continue  // unknown arguments are ignored, as before (cache busters and the like)
            }
        }
        return query
    }

    /// `<path?same filters&before=last>; rel="next"` when more rows follow, else `nil`.
    ///
    /// Only the list's own arguments are carried over: anything else in the query (a `token=` a
    /// client put there by mistake, a cache buster) would otherwise be echoed into a header that
    /// proxies and clients log and follow.
    static func nextLink(for request: HTTPRequest, page: OrderPage) -> String? {
        guard let next = page.next else { return nil }
        var items = request.query.filter { listArguments.contains($0.name) }.map {
            "\(encode($0.name))=\(encode($0.value))"
        }
        items.append("before=\(next.rawValue)")
        return "<\(request.path)?\(items.joined(separator: "&"))>; rel=\"next\""
    }

    /// The arguments `parse` reads, but `before` (the next page sets its own).
    private static let listArguments: Set<String> = ["status", "limit", "driver_id", "active", "q", "updated_after", "ids"]

    /// Percent-encodes everything but unreserved characters (RFC 3986 §2.3).
    private static func encode(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? ""
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func status(_ text: String) throws -> OrderStatus {
        guard let status = OrderStatus(rawValue: text) else {
            let all = OrderStatus.allCases.map(\.rawValue).joined(separator: ", ")
            throw invalid("status must be one of: \(all).")
        }
        return status
    }

    private static func positiveID(_ text: String, _ name: String) throws -> Int64 {
        guard let value = Int64(text), value > 0 else { throw invalid("\(name) must be a positive integer id.") }
        return value
    }

    private static func invalid(_ message: String) -> APIError { APIError(400, "invalid_field", message) }
}
