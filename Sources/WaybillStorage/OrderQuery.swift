public import Foundation
public import WaybillDomain

/// Which orders of a company a list page holds: filters, a keyset cursor and a page size.
///
/// Pages are newest first by id (ids only grow), and the cursor is the last id already seen
/// (`before`): a page is `id < before`, so orders created while a client pages cannot shift or
/// repeat rows the way an OFFSET would, and every page costs one index range scan however long
/// the history is.
public struct OrderQuery: Sendable, Equatable {
    /// Only this driver's orders (always set for a driver: isolation is the caller's filter).
    public var driver: UserID?
    /// Only these statuses; empty means any.
    public var statuses: Set<OrderStatus>
    /// Only orders not completed or cancelled (the panel's default view). Combines with `statuses`
    /// by intersection.
    public var activeOnly: Bool
    /// Number or title contains this text (case-folded with Unicode's default mapping, not only
    /// ASCII; `%` and `_` are literal).
    public var text: String?
    /// Only orders updated strictly after this moment.
    public var updatedAfter: Date?
    /// Only these ids (missing ones are deleted or not visible, and simply absent).
    public var ids: [OrderID]?
    /// Keyset cursor: only ids below this one (the last id of the previous page).
    public var before: OrderID?
    /// At most this many rows (at least 1).
    public var limit: Int
    /// With `text`: how many orders one page may read at most (see `textScanWindow`).
    public var textWindow: Int = OrderQuery.textScanWindow

    public init(
        driver: UserID? = nil, statuses: Set<OrderStatus> = [], activeOnly: Bool = false, text: String? = nil,
        updatedAfter: Date? = nil, ids: [OrderID]? = nil, before: OrderID? = nil, limit: Int = 100
    ) {
        self.driver = driver
        self.statuses = statuses
        self.activeOnly = activeOnly
        self.text = text
        self.updatedAfter = updatedAfter
        self.ids = ids
        self.before = before
        self.limit = limit
    }

    /// The statuses a row may have, sorted by name; `nil` when any status matches. An empty
    /// array means nothing can match (e.g. `completed` with `activeOnly`).
    public var allowedStatuses: [OrderStatus]? {
        var allowed: Set<OrderStatus>? = statuses.isEmpty ? nil : statuses
        if activeOnly { allowed = (allowed ?? Set(OrderStatus.allCases)).filter { !Self.finished.contains($0) } }
        return allowed.map { $0.sorted { $0.rawValue < $1.rawValue } }
    }

    /// Whether the query can match no row at all without asking the store.
    public var matchesNothing: Bool { allowedStatuses?.isEmpty == true || ids?.isEmpty == true || limit < 1 }

    /// `text` lower-cased, to be found in the lower-cased number or title (SQL `instr`/`strpos`,
    /// so `%`, `_` and `\\` are plain characters). Both stores lower-case with Unicode's default
    /// case mapping (Swift's `lowercased()` on SQLite, ICU's root locale on PostgreSQL), so "łódź"
    /// finds "ŁÓDŹ" on either, whatever the database's own locale.
    public var foldedText: String? {
        guard let text, !text.isEmpty else { return nil }
        return Self.fold(text)
    }

    /// Lower-cased, with the Greek final sigma as a plain sigma: ICU (PostgreSQL) writes "ς" at the
    /// end of a word and Swift "σ" everywhere, so both stores map it to "σ" after lower-casing.
    public static func fold(_ text: String) -> String {
        let lowered = text.lowercased()
        guard lowered.contains("ς") else { return lowered }
        return String(lowered.map { $0 == "ς" ? "σ" : $0 })
    }

    /// Statuses that end an order's life.
    public static let finished: Set<OrderStatus> = [.completed, .cancelled]

    /// Whether the query asks only for finished orders updated after a moment at most
    /// `recentlyFinishedReach` before `now` (the driver list's recent half: a day): the stores then
    /// add `finishedOnlyClause` to their SQL, so that the partial index of finished orders by driver
    /// and update time (migration 0015) serves it.
    ///
    /// Why the reach: that index gives the rows by update time, so they are sorted by id after; a
    /// moment far back sorts all of a driver's finished orders since then. Measured with 3 000
    /// finished orders per driver, a moment years back: 6.5 ms of server CPU per request with the
    /// index against 0.3 ms walking by id for `limit=20` (10 against 2.6 ms for 500), while a day
    /// back the index takes 0.24 ms against 5.4 (docs/HISTORY-BENCH.md, 2026-12-06).
    public func isRecentlyFinished(now: Date) -> Bool {
        guard let updatedAfter, updatedAfter >= now.addingTimeInterval(-Self.recentlyFinishedReach),
            let allowed = allowedStatuses, !allowed.isEmpty
        else { return false }
        return allowed.allSatisfy { Self.finished.contains($0) }
    }

    /// See `isRecentlyFinished(now:)`: a week.
    public static let recentlyFinishedReach: TimeInterval = 7 * 24 * 3600

    /// SQL that restates `finished` as literals, the predicate of both stores' partial index of
    /// finished orders word for word: neither SQLite nor PostgreSQL proves that a partial index
    /// applies from a bound parameter's value. A constant: it adds one statement text per shape.
    public static let finishedOnlyClause =
        "status IN (" + finished.map { "'\($0.rawValue)'" }.sorted().joined(separator: ", ") + ")"

    /// A `text` query reads at most this many of the company's orders (by id, below `before`) per
    /// page: a text that matches nothing costs a window, not the whole history. A page may then
    /// be short and still have a next page (its cursor is the window's end).
    public static let textScanWindow = 10_000
}

/// One page of a list: its rows (newest first) and the cursor of the next (older) page.
public struct OrderPage: Sendable, Equatable {
    public var rows: [OrderSummary]
    /// The next page's `before`, `nil` on the last page. Usually the last row's id; after a text
    /// page that stopped at the scan window, the window's end (the page may even be empty).
    public var next: OrderID?

    public init(rows: [OrderSummary], next: OrderID?) {
        self.rows = rows
        self.next = next
    }

    /// The rows fetched with one extra (`limit + 1`): more than `limit` means a next page.
    public init(fetched: [OrderSummary], limit: Int, windowEnd: OrderID? = nil) {
        rows = Array(fetched.prefix(limit))
        next = fetched.count > limit ? rows.last?.id : windowEnd
    }

    /// Older matching rows may exist.
    public var hasMore: Bool { next != nil }

    public static let empty = OrderPage(rows: [], next: nil)
}
