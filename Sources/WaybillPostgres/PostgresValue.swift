import Foundation
import WaybillDomain

/// A statement parameter: the one place Swift values meet PostgreSQL's text protocol.
///
/// Every parameter travels in text format and the server infers its type from the statement,
/// which keeps the C boundary to C strings (binary format would save microseconds and add
/// byte-order code, see the field notes).
enum PostgresValue {
    case null
    case integer(Int64)
    case text(String)
    case bytea([UInt8])
    case bool(Bool)

    static func int(_ value: Int) -> PostgresValue { .integer(Int64(value)) }

    /// An identifier as its integer; `nil` as NULL.
    static func id(_ value: (some Identifier)?) -> PostgresValue {
        value.map { .integer($0.rawValue) } ?? .null
    }

    /// Dates are BIGINT milliseconds since the epoch, exactly as the SQLite store keeps them:
    /// event cursors fingerprint `committed_at` in milliseconds, so both stores must round-trip
    /// the same value. Sub-millisecond precision is dropped (to the nearest millisecond).
    static func date(_ value: Date?) -> PostgresValue {
        value.map { .integer($0.postgresMilliseconds) } ?? .null
    }

    static func optionalText(_ value: String?) -> PostgresValue {
        value.map { .text($0) } ?? .null
    }

    /// The text form sent to the server; `nil` for SQL NULL.
    /// - Throws: `.invalidValue` for text with a NUL character, which PostgreSQL's `text`
    ///   cannot hold (libpq would silently cut the string there).
    func wireText() throws(PostgresError) -> String? {
        switch self {
        case .null: return nil
        case .integer(let value): return String(value)
        case .bool(let value): return value ? "t" : "f"
        case .bytea(let bytes): return Self.hexLiteral(bytes)
        case .text(let text):
            guard !text.utf8.contains(0) else {
                throw PostgresError(.invalidValue, message: "text with a NUL character cannot be stored")
            }
            return text
        }
    }

    /// `bytea`'s hex input form, `\x` and two digits a byte, built in one buffer. Stored answers of
    /// keyed writes run to hundreds of kilobytes; a `String` per byte (as before) cost millions of
    /// allocations per write, with the order's row locked (found by a review).
    static func hexLiteral(_ bytes: [UInt8]) -> String {
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: 2 + 2 * bytes.count) { buffer in
            buffer[0] = UInt8(ascii: "\\")
            buffer[1] = UInt8(ascii: "x")
            digits.withUTF8Buffer { hex in
                for (i, byte) in bytes.enumerated() {
                    buffer[2 + 2 * i] = hex[Int(byte >> 4)]
                    buffer[3 + 2 * i] = hex[Int(byte & 0x0f)]
                }
            }
            return 2 + 2 * bytes.count
        }
    }
}

extension Date {
    /// Milliseconds since the epoch, to the nearest: the stored form of a date. Not rounded down:
    /// a date rebuilt as `ms / 1000` can sit a hair below `ms` and would drift by 1 ms per rewrite
    /// (and change the event cursor's fingerprint, which rounds to the nearest too).
    var postgresMilliseconds: Int64 { epochMilliseconds }

    init(postgresMilliseconds millis: Int64) {
        self.init(timeIntervalSince1970: Double(millis) / 1000)
    }

    /// This date as it reads back from the store.
    var postgresRoundTripped: Date { Date(postgresMilliseconds: postgresMilliseconds) }
}
