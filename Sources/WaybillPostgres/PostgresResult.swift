internal import CPostgres
import Foundation

/// One `PGresult`, owned by this object: `deinit` clears it.
///
/// Read-only once received (libpq allows reading it from any thread, but it never leaves the
/// worker that ran the statement). Values are read in text format.
final class PostgresResult {
    private let handle: OpaquePointer
    let sql: String

    init(handle: OpaquePointer, sql: String) {
        self.handle = handle
        self.sql = sql
    }

    deinit { PQclear(handle) }

    var rowCount: Int { Int(PQntuples(handle)) }

    /// Rows changed by an INSERT, UPDATE or DELETE (`PQcmdTuples`, "" for other statements).
    var affectedRows: Int { Int(String(cString: PQcmdTuples(handle))) ?? 0 }

    func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(handle, Int32(row), Int32(column)) == 1 }

    func text(_ row: Int, _ column: Int) -> String {
        guard let value = PQgetvalue(handle, Int32(row), Int32(column)) else { return "" }
        let count = Int(PQgetlength(handle, Int32(row), Int32(column)))
        return value.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }
    }

    /// A `bytea` column: the server sends `\x` + hex in text format.
    func bytes(_ row: Int, _ column: Int) -> [UInt8] {
        guard let value = PQgetvalue(handle, Int32(row), Int32(column)) else { return [] }
        var length = 0
        guard let decoded = value.withMemoryRebound(to: UInt8.self, capacity: 1, { PQunescapeBytea($0, &length) })
        else { return [] }
        defer { PQfreemem(decoded) }
        return Array(UnsafeBufferPointer(start: decoded, count: length))
    }

    /// Decodes every row with `decode`.
    func rows<T>(_ decode: (PostgresRow) throws(PostgresError) -> T) throws(PostgresError) -> [T] {
        var rows: [T] = []
        rows.reserveCapacity(rowCount)
        for index in 0..<rowCount { rows.append(try decode(PostgresRow(result: self, index: index))) }
        return rows
    }
}

/// One row of a result, handed to decoding closures; valid only during the call.
struct PostgresRow {
    fileprivate let result: PostgresResult
    fileprivate let index: Int

    func text(_ column: Int) -> String { result.text(index, column) }
    func optionalText(_ column: Int) -> String? { result.isNull(index, column) ? nil : text(column) }
    func bytes(_ column: Int) -> [UInt8] { result.bytes(index, column) }
    func bool(_ column: Int) -> Bool { text(column) == "t" }

    func int64(_ column: Int) throws(PostgresError) -> Int64 {
        guard let value = Int64(text(column)) else { throw mismatch(column, "integer") }
        return value
    }
    func int(_ column: Int) throws(PostgresError) -> Int { Int(try int64(column)) }
    func optionalInt64(_ column: Int) throws(PostgresError) -> Int64? {
        result.isNull(index, column) ? nil : try int64(column)
    }
    func date(_ column: Int) throws(PostgresError) -> Date { Date(postgresMilliseconds: try int64(column)) }
    func optionalDate(_ column: Int) throws(PostgresError) -> Date? {
        try optionalInt64(column).map(Date.init(postgresMilliseconds:))
    }

    /// A `RawRepresentable` enum stored as text; a value this build does not know is corruption.
    func enumValue<E: RawRepresentable>(_ column: Int, as type: E.Type) throws(PostgresError) -> E
    where E.RawValue == String {
        guard let value = E(rawValue: text(column)) else { throw mismatch(column, "\(E.self)") }
        return value
    }

    private func mismatch(_ column: Int, _ expected: String) -> PostgresError {
        PostgresError(.invalidValue, message: "unexpected \(expected) value in column \(column)", sql: result.sql)
    }
}
