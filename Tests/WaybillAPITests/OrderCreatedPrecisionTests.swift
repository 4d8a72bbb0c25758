import Foundation
import Testing
import WaybillDomain

@testable import WaybillClient

/// `If-Order-Created` only works if the client gets back, from the `created_at` text the server
/// wrote, the very millisecond the server compares with: the server writes `Timestamp.string`
/// (whole milliseconds, rounded), the client parses it (`WireJSON.parseDate`) and rounds again
/// (`HTTPOrdersAPI.milliseconds`). Checked across the range a `created_at` can take and beyond
/// (the `Timestamp` notes drift outside 2004–2039 for a careless rounding).
struct OrderCreatedPrecisionTests {
    @Test func theClientReadsBackTheMillisecondTheServerWrote() throws {
        var millis: [Int64] = [0, 1, 999, 1_000, 1_001, 1_764_910_042_123, 1_764_910_042_999, 4_102_444_799_999]
        millis += [-1, -999, -1_001, -86_400_001]  // before 1970
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { millis.append(Int64.random(in: 0...253_402_300_799_999, using: &generator)) }  // to 9999
        for value in millis {
            let text = Timestamp.string(Date(timeIntervalSince1970: Double(value) / 1000))
            let parsed = try #require(WireJSON.parseDate(text), "\(text)")
            #expect(HTTPOrdersAPI.milliseconds(parsed) == value, "\(text)")
        }
    }
}
