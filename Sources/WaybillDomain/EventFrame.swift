public import Foundation

/// The wire form of events (SPEC §3, §4): JSON text frames, encoded once per event.
public enum EventFrame {
    /// `{"type":"order_…","id":42,"order_id":42,…,"event_id":1234,"cursor":"1234-0b7e55d1"}` for a committed event.
    public static func json(_ stored: StoredEvent) -> String {
        // Appended into one string with room for the whole frame: concatenating and interpolating
        // made a temporary string per field and regrew the frame four or five times (measured in
        // allocations per write, docs/BENCHMARKS.md, 2026-12-03). Every write encodes one frame.
        let e = stored.event
        var s = ""
        s.reserveCapacity(320 + e.number.utf8.count)
        s += "{\"type\":\""
        s += e.type.rawValue
        s += "\",\"id\":"
        s += e.orderID.description
        s += ",\"order_id\":"
        s += e.orderID.description
        s += ",\"number\":"
        appendQuoted(e.number, to: &s)
        s += ",\"old_status\":"
        if let old = e.oldStatus {
            s += "\""
            s += old.rawValue
            s += "\""
        } else {
            s += "null"
        }
        s += ",\"new_status\":\""
        s += e.newStatus.rawValue
        s += "\",\"driver_id\":"
        s += e.driverID?.description ?? "null"
        if e.type == .assigned || e.type == .unassigned {
            s += ",\"old_driver_id\":"
            s += e.oldDriverID?.description ?? "null"
        }
        let changedAt = Timestamp.string(e.changedAt)
        if e.type == .seen, let version = e.seenVersion, let driver = e.driverID {
            // The same shape as the REST `seen` field: {"driver_id":7,"version":5,"at":"…Z"}.
            s += ",\"seen\":{\"driver_id\":"
            s += driver.description
            s += ",\"version\":"
            s += String(version)
            s += ",\"at\":\""
            s += changedAt
            s += "\"}"
        }
        s += ",\"changed_at\":\""
        s += changedAt
        s += "\",\"event_id\":"
        s += stored.id.description
        s += ",\"cursor\":\""
        s += stored.cursor.description
        s += "\"}"
        return s
    }

    /// `{"type":"connected","user_id":7,"groups":["driver_7"],"event_id":1230,"cursor":"1230-9f3a61c2"}`.
    public static func connected(userID: UserID, groups: [Group], newest: EventCursor) -> String {
        let names = groups.map { quoted($0.name) }.joined(separator: ",")
        return "{\"type\":\"connected\",\"user_id\":\(userID),\"groups\":[\(names)],\"event_id\":\(newest.id)"
            + ",\"cursor\":\"\(newest)\"}"
    }

    public static let pong = "{\"type\":\"pong\"}"
    public static let reset = "{\"type\":\"reset\"}"

    /// A JSON string literal for `text`, escaped.
    public static func quoted(_ text: String) -> String {
        var out = ""
        appendQuoted(text, to: &out)
        return out
    }

    /// Appends `text` as a JSON string literal, escaped.
    static func appendQuoted(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "<": out += "\\u003c"  // safe to embed anywhere
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
    }
}

/// ISO 8601 timestamps in UTC with milliseconds: `2026-11-30T10:15:00.123Z`.
public enum Timestamp {
    public static func string(_ date: Date) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        append(date, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `2026-11-30T10:15:00.123Z` to `bytes`.
    ///
    /// Digits are written by hand: `String(format:)` went through CoreFoundation's formatter and was
    /// about 5 % of the server's CPU at 1 000 writes/s (several timestamps per answer and per event).
    public static func append(_ date: Date, to bytes: inout [UInt8]) {
        let millis = date.epochMillisecondsDown
        // Floor division: a time before 1970 has a negative remainder with `/` and `%`.
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        let ms = Int(millis - seconds * 1000)
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func digits(_ value: Int, _ count: Int) {
            var divisor = 1
            for _ in 1..<count { divisor *= 10 }
            var rest = value
            for _ in 0..<count {
                bytes.append(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: (rest / divisor) % 10))
                rest %= divisor
                divisor /= 10
            }
        }
        let year = Int(parts.tm_year) + 1900
        if (0...9999).contains(year) { digits(year, 4) } else { bytes.append(contentsOf: String(year).utf8) }
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mon) + 1, 2)
        bytes.append(UInt8(ascii: "-"))
        digits(Int(parts.tm_mday), 2)
        bytes.append(UInt8(ascii: "T"))
        digits(Int(parts.tm_hour), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_min), 2)
        bytes.append(UInt8(ascii: ":"))
        digits(Int(parts.tm_sec), 2)
        bytes.append(UInt8(ascii: "."))
        digits(ms, 3)
        bytes.append(UInt8(ascii: "Z"))
    }

    /// Parses ISO 8601 with or without fractional seconds; `nil` if it is not a timestamp.
    public static func parse(_ text: String) -> Date? {
        let withFraction = ISO8601DateFormatter()
        withFraction.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = withFraction.date(from: text) { return date }
        let plain = ISO8601DateFormatter()
        plain.formatOptions = [.withInternetDateTime]
        return plain.date(from: text)
    }
}
