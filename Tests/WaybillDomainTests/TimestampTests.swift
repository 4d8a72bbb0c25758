import Foundation
import Testing
import WaybillDomain

/// `Timestamp` writes and reads its digits by hand: the text must agree with `String(format:)` over
/// `gmtime_r`, read back as the instant the stores keep, and refuse what is not a time.
@Suite struct TimestampTests {
    private static func reference(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = millis >= 0 ? millis / 1000 : (millis - 999) / 1000
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1,
            Int(parts.tm_mday), Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec), Int(millis - seconds * 1000))
    }

    @Test func agreesWithTheFormattedReference() {
        var generator = SystemRandomNumberGenerator()
        var dates = [
            Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: -0.001), Date(timeIntervalSince1970: 59.999),
            Date(timeIntervalSince1970: 951_782_400.5),  // 2000-02-29
            Date(timeIntervalSince1970: 253_402_300_799.999),  // 9999-12-31T23:59:59.999
            Date(timeIntervalSince1970: -62_135_596_800),  // 0001-01-01
        ]
        for _ in 0..<2000 { dates.append(Date(timeIntervalSince1970: Double.random(in: -4e9...8e9, using: &generator))) }
        // The whole range written by arithmetic (`ASCIIText.writeTimestamp`), its ends, and the days a
        // calendar gets wrong first: the leap days of centuries that have one (0, 1600, 2000) and
        // the March 1sts of centuries that have none (1700, 1900, 2100).
        for text in [
            "0000-01-01T00:00:00.000Z", "0000-02-29T12:00:00.000Z", "0000-12-31T23:59:59.999Z", "1600-02-29T00:00:00.000Z",
            "1700-03-01T00:00:00.000Z", "1900-02-28T23:59:59.999Z", "1900-03-01T00:00:00.000Z", "1969-12-31T23:59:59.999Z",
            "2000-02-29T23:59:59.999Z", "2100-03-01T00:00:00.001Z", "9999-12-31T23:59:59.999Z",
        ] {
            dates.append(Self.stored(try! #require(Timestamp.parse(text)).epochMilliseconds))
        }
        for _ in 0..<20_000 {
            dates.append(
                Self.stored(Int64.random(in: Timestamp.earliestMilliseconds...Timestamp.latestMilliseconds, using: &generator)))
        }
        for date in dates { #expect(Timestamp.string(date) == Self.reference(date), "\(date.timeIntervalSince1970)") }
    }

    @Test func yearsPastFourDigitsAreWrittenWhole() {
        #expect(Timestamp.string(Date(timeIntervalSince1970: 253_402_300_800)) == "10000-01-01T00:00:00.000Z")
    }

    @Test func appendsToABuffer() {
        var bytes = Array("at ".utf8)
        Timestamp.append(Date(timeIntervalSince1970: 0.25), to: &bytes)
        #expect(String(decoding: bytes, as: UTF8.self) == "at 1970-01-01T00:00:00.250Z")
    }

    /// A date as the stores read it back: whole milliseconds over 1000.
    private static func stored(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }

    @Test func everyStoredMillisecondReadsBackAsWritten() throws {
        var generator = SystemRandomNumberGenerator()
        // 1001 ms is 1000.9999999999999 ms as a Double over 1000: rounding down printed .000.
        var values: [Int64] = [0, 1, 999, 1_001, 1_003, -1, -1_001, Timestamp.earliestMilliseconds, Timestamp.latestMilliseconds]
        for _ in 0..<20_000 {
            values.append(Int64.random(in: Timestamp.earliestMilliseconds...Timestamp.latestMilliseconds, using: &generator))
        }
        for millis in values {
            let text = Timestamp.string(Self.stored(millis))
            let read = try #require(Timestamp.parse(text), "\(millis): \(text)")
            #expect(read.epochMilliseconds == millis, "\(millis): \(text)")
            #expect(Timestamp.string(read) == text)
        }
    }

    @Test func readsRFC3339() {
        func utc(_ text: String) -> String? { Timestamp.parse(text).map(Timestamp.string) }
        #expect(utc("2026-12-01T08:00:00Z") == "2026-12-01T08:00:00.000Z")
        #expect(utc("2026-12-01t08:00:00z") == "2026-12-01T08:00:00.000Z")
        #expect(utc("2026-12-01T08:00:00.5Z") == "2026-12-01T08:00:00.500Z")
        #expect(utc("2026-12-01T08:00:00.12Z") == "2026-12-01T08:00:00.120Z")
        #expect(utc("2026-12-01T08:00:00.123999999Z") == "2026-12-01T08:00:00.123Z")  // past ms: dropped
        #expect(utc("2026-12-01T09:15:00+01:15") == "2026-12-01T08:00:00.000Z")
        #expect(utc("2026-12-01T00:30:00-08:00") == "2026-12-01T08:30:00.000Z")
        #expect(utc("2026-12-31T23:00:00-01:00") == "2027-01-01T00:00:00.000Z")
        #expect(utc("2026-12-01T08:00:00-00:00") == "2026-12-01T08:00:00.000Z")
        #expect(utc("2000-02-29T00:00:00Z") == "2000-02-29T00:00:00.000Z")
        #expect(utc("2024-02-29T23:59:59.999Z") == "2024-02-29T23:59:59.999Z")
        #expect(utc("1500-06-01T00:00:00Z") == "1500-06-01T00:00:00.000Z")  // proleptic Gregorian, no Julian shift
        #expect(utc("0000-01-01T00:00:00Z") == "0000-01-01T00:00:00.000Z")
        #expect(utc("9999-12-31T23:59:59.999Z") == "9999-12-31T23:59:59.999Z")
        #expect(utc("1969-12-31T23:59:59.999Z") == "1969-12-31T23:59:59.999Z")
    }

    @Test func refusesWhatIsNotATime() {
        let refused = [
            "", "tomorrow", "2026-12-01", "2026-12-01T08:00Z", "2026-12-01T08:00:00", "2026-12-01 08:00:00Z",
            "2026-02-30T10:00:00Z", "2026-04-31T00:00:00Z", "2025-02-29T00:00:00Z", "2100-02-29T00:00:00Z",
            "2026-00-10T00:00:00Z", "2026-13-01T00:00:00Z", "2026-12-00T00:00:00Z", "2026-12-01T24:00:00Z",
            "2026-12-01T23:60:00Z", "2026-12-31T23:59:60Z", "2026-12-01T08:00:00.Z", "2026-12-01T08:00:00,5Z",
            "2026-12-01T08:00:00+0100", "2026-12-01T08:00:00+01", "2026-12-01T08:00:00+24:00", "2026-12-01T08:00:00+01:60",
            "2026-12-01T08:00:00Zjunk", " 2026-12-01T08:00:00Z", "+2026-12-01T08:00:00Z", "12026-12-01T08:00:00Z",
            "999999-01-01T00:00:00Z", "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59.999-00:01",
            "２０２６-12-01T08:00:00Z", "2026-1a-01T08:00:00Z",
        ]
        for text in refused { #expect(Timestamp.parse(text) == nil, "\(text)") }
    }

    /// Where Foundation's formatter is right (Gregorian years, valid dates), both read the same instant.
    @Test func agreesWithFoundationOnOrdinaryTimes() throws {
        var generator = SystemRandomNumberGenerator()
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for _ in 0..<2_000 {
            let millis = Int64.random(in: -2_208_988_800_000...4_102_444_800_000, using: &generator)  // 1900–2100
            let offset = Int.random(in: -14 * 60...14 * 60, using: &generator)
            formatter.timeZone = TimeZone(secondsFromGMT: offset * 60)
            let text = formatter.string(from: Self.stored(millis))
            let ours = try #require(Timestamp.parse(text), "\(text)")
            let theirs = try #require(formatter.date(from: text))
            #expect(ours.epochMilliseconds == theirs.epochMilliseconds, "\(text)")
        }
    }
}
