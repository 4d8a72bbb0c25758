/// Numbers and times written as ASCII bytes straight into a buffer, without a `String` of their own.
///
/// Why a module: the domain (ETag parts, group names, the API's timestamps) and the logger (every
/// access line's time) each wrote these by hand on their hot paths (docs/BENCHMARKS.md,
/// 2026-12-07 (11:10– UTC)), and neither may depend on the other: one piece of code serves both.
public enum ASCIIText {
    /// The most bytes `writeDecimal` writes: a 64-bit number with its sign.
    public static let longestDecimal = 20

    /// Writes `value` in decimal (with a `-` below zero) into `out` from `offset`, and returns the
    /// offset after it. `out` must have room for `longestDecimal` bytes there (checked).
    public static func writeDecimal(_ value: Int64, into out: UnsafeMutableBufferPointer<UInt8>, at offset: Int) -> Int {
        precondition(offset >= 0 && out.count - offset >= longestDecimal, "no room for a number")
        var at = offset
        if value < 0 {
            out[at] = UInt8(ascii: "-")
            at += 1
        }
        var magnitude = value.magnitude, divisor: UInt64 = 1
        while magnitude / divisor >= 10 { divisor *= 10 }
        while divisor > 0 {
            out[at] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: magnitude / divisor)
            at += 1
            magnitude %= divisor
            divisor /= 10
        }
        return at
    }

    /// The bytes of a UTC time as `writeTimestamp` writes it: `2026-11-30T10:15:00.123Z`.
    public static let timestampLength = 24

    /// The earliest and latest milliseconds since 1970 `writeTimestamp` takes: the four-digit years.
    public static let earliestTimestamp: Int64 = -62_167_219_200_000  // 0000-01-01T00:00:00.000Z
    public static let latestTimestamp: Int64 = 253_402_300_799_999  // 9999-12-31T23:59:59.999Z

    /// Writes `millis` (milliseconds since 1970, within `earliestTimestamp...latestTimestamp`:
    /// checked) as `2026-11-30T10:15:00.123Z` into the first `timestampLength` bytes of `out`.
    /// The proleptic Gregorian calendar, by arithmetic (`civilDate`).
    public static func writeTimestamp(millisecondsSince1970 millis: Int64, into out: UnsafeMutableBufferPointer<UInt8>) {
        precondition((earliestTimestamp...latestTimestamp).contains(millis) && out.count >= timestampLength)
        // Floor division: a time before 1970 has a negative remainder with `/` and `%`.
        let days = millis >= 0 ? millis / 86_400_000 : (millis - 86_399_999) / 86_400_000
        let inDay = Int(millis - days * 86_400_000)
        let (year, month, day) = civilDate(daysSince1970: Int(days))
        func digits(_ value: Int, _ count: Int, at offset: Int) {
            var rest = value
            for index in stride(from: offset + count - 1, through: offset, by: -1) {
                out[index] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            }
        }
        digits(year, 4, at: 0)
        out[4] = UInt8(ascii: "-")
        digits(month, 2, at: 5)
        out[7] = UInt8(ascii: "-")
        digits(day, 2, at: 8)
        out[10] = UInt8(ascii: "T")
        digits(inDay / 3_600_000, 2, at: 11)
        out[13] = UInt8(ascii: ":")
        digits(inDay / 60_000 % 60, 2, at: 14)
        out[16] = UInt8(ascii: ":")
        digits(inDay / 1000 % 60, 2, at: 17)
        out[19] = UInt8(ascii: ".")
        digits(inDay % 1000, 3, at: 20)
        out[23] = UInt8(ascii: "Z")
    }

    /// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's `civil_from_days`:
    /// 400-year eras of 146 097 days, counted with March first so the leap day comes last).
    public static func civilDate(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
