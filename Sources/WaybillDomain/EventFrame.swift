public import Foundation
import WaybillText

/// The wire form of events (SPEC §3, §4): JSON text frames, encoded once per event.
public enum EventFrame {
    /// `{"type":"order_…","id":42,"order_id":42,…,"event_id":1234,"cursor":"1234-0b7e55d1"}` for a committed event.
    public static func json(_ stored: StoredEvent) -> String { String(decoding: utf8(stored), as: UTF8.self) }

    /// The frame of `json(_:)` as UTF-8 bytes, what a socket is sent.
    ///
    /// Written byte by byte into one reserved array: appending into a reserved `String` (the build
    /// before this one) paid a capacity and uniqueness check and a UTF-8 view per field, and the
    /// text was then copied once more into the frame's storage. Every write encodes one frame
    /// (docs/BENCHMARKS.md, 2026-12-06 10:21–).
    public static func utf8(_ stored: StoredEvent) -> [UInt8] {
        let e = stored.event
        var out = FrameBytes(capacity: 320 + e.number.utf8.count)
        out.put("{\"type\":\"")
        out.put(e.type.rawValue)
        out.put("\",\"id\":")
        out.put(e.orderID.rawValue)
        out.put(",\"order_id\":")
        out.put(e.orderID.rawValue)
        out.put(",\"number\":")
        out.quoted(e.number)
        out.put(",\"old_status\":")
        if let old = e.oldStatus {
            out.put("\"")
            out.put(old.rawValue)
            out.put("\"")
        } else {
            out.put("null")
        }
        out.put(",\"new_status\":\"")
        out.put(e.newStatus.rawValue)
        out.put("\",\"driver_id\":")
        out.put(e.driverID?.rawValue)
        if e.type == .assigned || e.type == .unassigned {
            out.put(",\"old_driver_id\":")
            out.put(e.oldDriverID?.rawValue)
        }
        if e.type == .seen, let version = e.seenVersion, let driver = e.driverID {
            // The same shape as the REST `seen` field: {"driver_id":7,"version":5,"at":"…Z"}.
            out.put(",\"seen\":{\"driver_id\":")
            out.put(driver.rawValue)
            out.put(",\"version\":")
            out.put(Int64(version))
            out.put(",\"at\":\"")
            Timestamp.append(e.changedAt, to: &out.bytes)
            out.put("\"}")
        }
        out.put(",\"changed_at\":\"")
        Timestamp.append(e.changedAt, to: &out.bytes)
        out.put("\",\"event_id\":")
        out.put(stored.id.rawValue)
        out.put(",\"cursor\":\"")
        let cursor = stored.cursor
        out.put(cursor.id.rawValue)
        out.put("-")
        out.put(cursor.check)
        out.put("\"}")
        return out.bytes
    }

    /// `{"type":"connected","user_id":7,"groups":["driver_7"],"event_id":1230,"cursor":"1230-9f3a61c2"}`.
    public static func connected(userID: UserID, groups: [Group], newest: EventCursor) -> String {
        let names = groups.map { quoted($0.name) }.joined(separator: ",")
        return "{\"type\":\"connected\",\"user_id\":\(userID),\"groups\":[\(names)],\"event_id\":\(newest.id)"
            + ",\"cursor\":\"\(newest)\"}"
    }

    /// `{"type":"pong","event_id":1234,"cursor":"1234-0b7e55d1"}`: a pong that also says how far this
    /// socket has been sent everything (the node's newest delivered event): a client resumes from
    /// there, so a long-lived socket's resume point does not age past the server's retention while
    /// none of its own events come (SPEC §4 names `type` only; clients ignore the rest).
    public static func pong(newest: EventCursor) -> String {
        "{\"type\":\"pong\",\"event_id\":\(newest.id),\"cursor\":\"\(newest)\"}"
    }
    public static let reset = "{\"type\":\"reset\"}"

    /// A JSON string literal for `text`, escaped as in every frame (`FrameBytes.quoted`).
    public static func quoted(_ text: String) -> String {
        var out = FrameBytes(capacity: text.utf8.count + 2)
        out.quoted(text)
        return String(decoding: out.bytes, as: UTF8.self)
    }
}

/// The bytes of an event frame as they are written (`EventFrame.utf8`).
struct FrameBytes {
    var bytes: [UInt8] = []

    init(capacity: Int) { bytes.reserveCapacity(capacity) }

    /// Text that needs no escaping: the frame's constant pieces, an enum's raw value, a cursor's
    /// hex digits.
    mutating func put(_ text: String) {
        var text = text
        text.withUTF8 { bytes.append(contentsOf: $0) }
    }

    /// A decimal integer.
    mutating func put(_ value: Int64) {
        if value < 0 {
            bytes.append(UInt8(ascii: "-"))
            // The magnitude of `Int64.min` does not fit an `Int64`.
            putDigits(UInt64(bitPattern: 0 &- value))
        } else {
            putDigits(UInt64(value))
        }
    }

    /// A decimal integer, or `null`.
    mutating func put(_ value: Int64?) {
        if let value { put(value) } else { put("null") }
    }

    private mutating func putDigits(_ value: UInt64) {
        // At most 20 digits: written from the back into a stack buffer, then appended in order.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            var index = buffer.count
            var rest = value
            repeat {
                index -= 1
                buffer[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            bytes.append(contentsOf: UnsafeMutableBufferPointer(rebasing: buffer[index...]))
        }
    }

    /// `text` as a JSON string literal, the one escaping of the event wire (`EventFrame.quoted` too):
    /// `"`, `\`, newline, return and tab in JSON's short forms, `<` and every other control
    /// character as `\u00xx`. Only ASCII bytes are ever escaped, and no byte of a multi-byte UTF-8
    /// sequence is ASCII, so the bytes are looked at one by one.
    mutating func quoted(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            for byte in utf8 {
                switch byte {
                case UInt8(ascii: "\""): put("\\\"")
                case UInt8(ascii: "\\"): put("\\\\")
                case UInt8(ascii: "\n"): put("\\n")
                case UInt8(ascii: "\r"): put("\\r")
                case UInt8(ascii: "\t"): put("\\t")
                case UInt8(ascii: "<"): put("\\u003c")  // safe to embed anywhere
                case ..<0x20:
                    put("\\u00")
                    bytes.append(Self.hex[Int(byte >> 4)])
                    bytes.append(Self.hex[Int(byte & 0xF)])
                default:
                    bytes.append(byte)
                }
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)
}

/// ISO 8601 timestamps in UTC with milliseconds: `2026-11-30T10:15:00.123Z`.
///
/// Both directions use the proleptic Gregorian calendar and whole milliseconds, rounded to the
/// nearest as the stores keep them (`Date.epochMilliseconds`), so a time written by `string` reads
/// back as the same instant and a time read by `parse` is written back as the same text (found by
/// a review: `ISO8601DateFormatter` switched to the Julian calendar before 1582 and rolled
/// `2026-02-30` over into March, so a stage sent back unchanged moved by days each time).
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
    ///
    /// The milliseconds are the nearest, like the stores': a stored time is `Double(ms) / 1000`, and
    /// rounding that back down gave one millisecond less for about one value in a hundred outside
    /// 2004–2039 (`1001 / 1000 * 1000` is `1000.9999999999999`).
    public static func append(_ date: Date, to bytes: inout [UInt8]) {
        let millis = date.epochMilliseconds
        guard (earliestMilliseconds...latestMilliseconds).contains(millis) else {
            appendThroughCalendar(millis, to: &bytes)
            return
        }
        // The four-digit years (every time the API keeps: `parse` takes no other) by arithmetic
        // (`ASCIIText.writeTimestamp`), into 24 bytes appended at once. Why: `gmtime_r` went
        // through glibc's time zone code and its global lock, and the bytes were appended one by
        // one: about 2 µs per write for the answer's and the event's times (docs/BENCHMARKS.md,
        // 2026-12-07 (11:10– UTC)).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: ASCIIText.timestampLength) { out in
            ASCIIText.writeTimestamp(millisecondsSince1970: millis, into: out)
            bytes.append(contentsOf: UnsafeBufferPointer(out))
        }
    }

    /// `append` through the C library's calendar (`gmtime_r`): what it did for every time before,
    /// kept for a time outside the four-digit years (a year with a sign or more digits).
    static func appendThroughCalendar(_ millis: Int64, to bytes: inout [UInt8]) {
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

    /// The earliest and latest instants `parse` accepts: the four-digit years, in UTC.
    public static let earliestMilliseconds = ASCIIText.earliestTimestamp  // 0000-01-01T00:00:00.000Z
    public static let latestMilliseconds = ASCIIText.latestTimestamp  // 9999-12-31T23:59:59.999Z

    /// Parses an RFC 3339 time (`2026-11-30T10:15:00Z`, `2026-11-30T11:15:00.5+01:00`): `nil` for
    /// anything else, including a day the month does not have, hour 24, a leap second, or an
    /// instant outside the four-digit years in UTC. Digits past the milliseconds are dropped.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8 { bytes in parseMilliseconds(bytes) }.map {
            Date(timeIntervalSince1970: Double($0) / 1000)
        }
    }

    /// Milliseconds since 1970 of an RFC 3339 time (see `parse`).
    static func parseMilliseconds(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        func number(_ count: Int) -> Int? {
            guard i + count <= bytes.count else { return nil }
            var value = 0
            for _ in 0..<count {
                let digit = Int(bytes[i]) - 48
                guard (0...9).contains(digit) else { return nil }
                value = value * 10 + digit
                i += 1
            }
            return value
        }
        func literal(_ allowed: UInt8...) -> Bool {
            guard i < bytes.count, allowed.contains(bytes[i]) else { return false }
            i += 1
            return true
        }
        guard let year = number(4), literal(UInt8(ascii: "-")), let month = number(2), literal(UInt8(ascii: "-")),
            let day = number(2), literal(UInt8(ascii: "T"), UInt8(ascii: "t")),
            let hour = number(2), literal(UInt8(ascii: ":")), let minute = number(2), literal(UInt8(ascii: ":")),
            let second = number(2)
        else { return nil }
        guard (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
            hour < 24, minute < 60, second < 60
        else { return nil }
        var millis = 0
        if literal(UInt8(ascii: ".")) {
            var count = 0
            while i < bytes.count, (48...57).contains(bytes[i]) {
                if count < 3 { millis = millis * 10 + Int(bytes[i]) - 48 }
                count += 1
                i += 1
            }
            guard count > 0 else { return nil }
            for _ in count..<max(count, 3) { millis *= 10 }
        }
        var offsetMinutes = 0
        if !literal(UInt8(ascii: "Z"), UInt8(ascii: "z")) {
            guard i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") else { return nil }
            let sign = bytes[i] == UInt8(ascii: "-") ? -1 : 1
            i += 1
            guard let hours = number(2), literal(UInt8(ascii: ":")), let minutes = number(2), hours < 24, minutes < 60
            else { return nil }
            offsetMinutes = sign * (hours * 60 + minutes)
        }
        guard i == bytes.count else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second - offsetMinutes * 60)
        let result = seconds * 1000 + Int64(millis)
        guard (earliestMilliseconds...latestMilliseconds).contains(result) else { return nil }
        return result
    }

    private static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (the civil-from-days inverse, counted in
    /// 400-year eras of 146 097 days with March as the first month, so the leap day comes last).
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
