import Foundation

/// The driver's list at any history length: what is still to do, plus what was finished lately.
///
/// Two pages merged: `active=true` (every order not completed or cancelled) and
/// `status=completed&status=cancelled&updated_after=<now − recentWindow>`. A driver's years of
/// history never travel; an order finished an hour ago stays on the phone until the window ends.
/// Each half has its own `ETag`; the list's tag is both joined with `|`, so an unchanged list is
/// still two 304s and no body. When one half changed and the other answered 304, the unchanged
/// half is fetched again without a tag (this client keeps no bodies: it is stateless).
extension HTTPOrdersAPI {
    /// Rows per half: the server's maximum. A driver with more active orders sees the newest 500.
    static let driverListLimit = 500

    func driverList(ifNoneMatch: String?) async throws -> Fetched<[OrderSummary]> {
        let tags = Self.splitTag(ifNoneMatch)
        let queries = driverListQueries()
        async let activeHalf = half(queries.active, ifNoneMatch: tags?.active)
        async let recentHalf = half(queries.recent, ifNoneMatch: tags?.recent)
        var (active, recent) = try await (activeHalf, recentHalf)
        if active == nil && recent == nil { return .notModified }
        if active == nil { active = try await half(queries.active, ifNoneMatch: nil) }
        if recent == nil { recent = try await half(queries.recent, ifNoneMatch: nil) }
        guard let active, let recent else { return .notModified }  // unreachable: an untagged GET never answers 304
        let tag = (active.etag ?? "") + "|" + (recent.etag ?? "")
        return .modified(Self.merge(active.rows, recent.rows), etag: tag)
    }

    /// The two halves' query items: `active` and `recent` (finished within `recentWindow`).
    func driverListQueries() -> (active: [URLQueryItem], recent: [URLQueryItem]) {
        let limit = URLQueryItem(name: "limit", value: String(Self.driverListLimit))
        let since = now().addingTimeInterval(-(recentWindow / .seconds(1)))
        return (
            [URLQueryItem(name: "active", value: "true"), limit],
            [
                URLQueryItem(name: "status", value: "completed"), URLQueryItem(name: "status", value: "cancelled"),
                URLQueryItem(name: "updated_after", value: Self.timestamp(since)), limit,
            ]
        )
    }

    /// One half, or `nil` for 304.
    private func half(_ query: [URLQueryItem], ifNoneMatch: String?) async throws -> (rows: [OrderSummary], etag: String?)? {
        switch try await conditionalGet(
            "api/orders/", query: query, ifNoneMatch: ifNoneMatch, as: [OrderSummary].self, what: "order list")
        {
        case .modified(let rows, let etag): return (rows, etag)
        case .notModified: return nil
        }
    }

    /// Both halves, newest first, each order once (the newer version if it moved between the two reads).
    static func merge(_ first: [OrderSummary], _ second: [OrderSummary]) -> [OrderSummary] {
        var byID: [OrderID: OrderSummary] = [:]
        for row in first + second where (byID[row.id]?.version ?? Int64.min) < row.version { byID[row.id] = row }
        return byID.values.sorted { $0.id > $1.id }
    }

    /// The list tag's two halves; `nil` for a tag this client did not make (then both go untagged).
    static func splitTag(_ tag: String?) -> (active: String?, recent: String?)? {
        guard let tag else { return nil }
        let parts = tag.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { return nil }
        return (parts[0].isEmpty ? nil : parts[0], parts[1].isEmpty ? nil : parts[1])
    }

    private static func timestamp(_ date: Date) -> String {
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return format.string(from: date)
    }
}
