import Foundation
import Testing
import WaybillDomain

@testable import WaybillAPI

/// The hand-written order JSON must be byte for byte what `JSONEncoder` gives for the same
/// `Encodable` values (list ETags hash the bytes; clients parse either).
@Suite struct OrderJSONWriterTests {
    private static func encoded<T: Encodable>(_ value: T) throws -> String {
        String(decoding: try JSONCoding.encoder().encode(value), as: UTF8.self)
    }

    private static func written(_ value: some JSONWritable) -> String {
        var json = JSONByteWriter()
        value.write(to: &json)
        return String(decoding: json.bytes, as: UTF8.self)
    }

    private static let awkward: String = {
        var text = "quote \" backslash \\ slash / tags <b>&amp; é 🚚 \u{7f}\u{80}\u{2028}"
        for value in 0..<0x20 { text.unicodeScalars.append(Unicode.Scalar(UInt8(value))) }
        return text
    }()

    private static let orders: [Order] = {
        let base = Date(timeIntervalSince1970: 1_796_000_000.123)
        var plain = Order(
            id: OrderID(7), companyID: CompanyID(1), number: "2026/11/0007", status: .new, driverID: nil,
            title: "Pallets", notes: "", stages: [], documents: [], createdAt: base, updatedAt: base + 0.5, version: 1)
        var full = plain
        full.id = OrderID(-12)  // any integer, signs included
        full.status = .inProgress
        full.driverID = UserID(1_234_567_890_123)
        full.title = awkward
        full.notes = awkward + awkward
        full.version = 0
        full.createdAt = Date(timeIntervalSince1970: -0.5)
        full.stages = [
            Stage(id: StageID(3), position: 1, kind: .pickup, address: awkward, plannedAt: base, completedAt: base + 1),
            Stage(id: nil, position: -2, kind: .delivery, address: "", plannedAt: nil, completedAt: nil),
        ]
        full.documents = [Document(id: DocumentID(9), name: "cmr.pdf", kind: awkward, createdAt: base)]
        full.seen = OrderReceipt(driverID: UserID(1_234_567_890_123), version: 3, at: base + 2.25)  // null in `plain`
        plain.id = nil
        return [plain, full]
    }()

    @Test func orderDetailsAreTheEncodersBytes() throws {
        for order in Self.orders {
            #expect(Self.written(OrderDetailJSON(order: order)) == (try Self.encoded(OrderDetailJSON(order: order))))
        }
    }

    @Test func orderListsAreTheEncodersBytes() throws {
        let rows = Self.orders.map { OrderSummaryJSON(summary: $0.summary) }
        #expect(Self.written(rows) == (try Self.encoded(rows)))
        #expect(Self.written([OrderSummaryJSON]()) == (try Self.encoded([OrderSummaryJSON]())))
    }

    @Test func responsesTakeTheWrittenPathOnlyForWritableValues() throws {
        let detail = OrderDetailJSON(order: Self.orders[1])
        #expect(try JSONCoding.bytes(detail) == Array(try JSONCoding.encoder().encode(detail)))
        // Anything else still goes through the encoder.
        #expect(try JSONCoding.bytes(["status": "ok"]) == Array(#"{"status":"ok"}"#.utf8))
    }

    @Test func requestDurationsHaveTwoDecimals() {
        #expect(APIResponder.milliseconds(0.0015) == "1.50")
        #expect(APIResponder.milliseconds(0.000_004) == "0.00")
        #expect(APIResponder.milliseconds(0.012_345) == "12.35")
        #expect(APIResponder.milliseconds(2.5) == "2500.00")
    }
}
