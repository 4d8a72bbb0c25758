import Foundation
import Testing

@testable import WaybillSQLite

/// Texts are bound from their UTF-8 in place (`SQLiteStatement.bind`): every shape a Swift string
/// can have arrives whole, as TEXT, and an empty string stays '' (never NULL).
struct SQLiteBindingTests {
    @Test func everyShapeOfTextIsStoredWholeAsText() throws {
        let database = TemporaryDatabase()
        defer { database.remove() }
        let db = try database.openRawConnection()
        defer { db.close() }
        let bridged = NSString(string: "bridged from Foundation, longer than fifteen bytes") as String
        let texts = [
            "", "a", "pending", "exactly15bytes!", "sixteen bytes!!!", "c:1 f:2 d:3", "nul\u{0}inside",
            "ünïcødé 🚚", String(repeating: "x", count: 5_000), bridged, String("a substring, copied"[...]),
        ]
        for text in texts {
            let row = try db.queryFirst("SELECT ?1, typeof(?1), length(CAST(?1 AS BLOB))", [.text(text)]) {
                (value: $0.text(0), type: $0.text(1), bytes: $0.int(2))
            }
            #expect(row?.type == "text", "\(text.prefix(20))")
            #expect(row?.bytes == text.utf8.count, "\(text.prefix(20))")
            #expect(row?.value == text, "\(text.prefix(20))")
        }
    }
}
