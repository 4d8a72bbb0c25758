import Foundation
import Testing
import WaybillDomain

/// `Timestamp` writes its digits by hand; it must agree with the `String(format:)` it replaced.
@Suite struct TimestampTests {
    private static func reference(_ date: Date) -> String {
        let millis = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
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
}
