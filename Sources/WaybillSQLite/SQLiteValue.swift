import Foundation
import WaybillDomain

/// A value bound to a statement parameter: the one place Swift values meet SQLite storage classes.
enum SQLiteValue: Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    static func int(_ value: Int) -> SQLiteValue { .integer(Int64(value)) }

    /// An identifier as its integer; `nil` as NULL.
    static func id(_ value: (some Identifier)?) -> SQLiteValue {
        value.map { .integer($0.rawValue) } ?? .null
    }

    /// Dates are stored as INTEGER milliseconds since the epoch (UTC): sortable, compact and
    /// readable by any backend. Sub-millisecond precision is dropped (to the nearest millisecond).
    static func date(_ value: Date?) -> SQLiteValue {
        value.map { .integer($0.sqliteMilliseconds) } ?? .null
    }

    static func optionalText(_ value: String?) -> SQLiteValue {
        value.map { .text($0) } ?? .null
    }

    /// Identifiers as one JSON array, for `IN (SELECT value FROM json_each(?))`: any number of
    /// them in one parameter, so the statement's text (and its cache entry) stays the same.
    static func ids(_ values: [some Identifier]) -> SQLiteValue {
        .text("[" + values.map { String($0.rawValue) }.joined(separator: ",") + "]")
    }
}

extension Date {
    /// Milliseconds since the epoch, to the nearest: the stored form of a date.
    /// Not rounded down: a date rebuilt from stored milliseconds (`ms / 1000`) can be a
    /// hair below the exact value, and rounding down would store `ms - 1` on every rewrite.
    var sqliteMilliseconds: Int64 { epochMilliseconds }

    init(sqliteMilliseconds millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }

    /// This date as it reads back from the store.
    var sqliteRoundTripped: Date { Date(sqliteMilliseconds: sqliteMilliseconds) }
}
