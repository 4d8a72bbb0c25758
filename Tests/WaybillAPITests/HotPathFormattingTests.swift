import Foundation
import Testing

@testable import WaybillAPI
@testable import WaybillObservability

/// The per-request helpers rewritten for speed (docs/BENCHMARKS.md, 2026-12-02) give what the
/// library calls they replaced gave.
struct HotPathFormattingTests {
    @Test func logTimestampsAreISO8601WithMillisecondsLikeFoundations() {
        let reference = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
        var millis: [Int64] = [
            0, 1, 999, 59_999, 86_399_999, 86_400_000, -1, -1_000, -86_400_000, -86_400_500,
            951_782_400_000,  // 2000-02-29
            951_868_800_000,  // 2000-03-01
            4_107_542_400_000,  // 2100-03-01 (2100 is no leap year)
            253_402_300_799_999,  // 9999-12-31T23:59:59.999
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { millis.append(Int64.random(in: -2_000_000_000_000...4_000_000_000_000, using: &generator)) }
        for ms in millis {
            // Half a millisecond in: both truncate to `ms`, whichever way the binary value falls.
            let date = Date(timeIntervalSince1970: (Double(ms) + 0.5) / 1000)
            #expect(Logger.timestamp(date) == date.formatted(reference), "\(ms)")
            // On the millisecond itself: that millisecond, never the one before.
            let exact = Date(timeIntervalSince1970: Double(ms) / 1000)
            #expect(Logger.timestamp(exact) == Logger.timestamp(date), "\(ms)")
        }
        #expect(Logger.timestamp(Date(timeIntervalSince1970: 1_764_648_306.789)) == "2025-12-02T04:05:06.789Z")
    }

    @Test func sha256MatchesTheStandardVectors() {
        func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
        #expect(hex(Crypto.sha256("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(Crypto.sha256("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        let million = [UInt8](repeating: 0x61, count: 1_000_000)
        #expect(hex(Crypto.sha256(million)) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
