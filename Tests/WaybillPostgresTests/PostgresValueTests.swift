import Testing

@testable import WaybillPostgres

/// The text forms values travel in to PostgreSQL. Round trips through a server are in the store's
/// conformance suite (stored idempotent answers); these pin the encoding itself.
struct PostgresValueTests {
    /// `bytea` goes as `\x` and two lower-case hex digits a byte, every byte value included.
    @Test func byteaIsItsHexInputForm() throws {
        let all = (0...255).map(UInt8.init)
        let expected = "\\x" + all.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        #expect(try PostgresValue.bytea(all).wireText() == expected)
        #expect(try PostgresValue.bytea([]).wireText() == "\\x")
        #expect(try PostgresValue.bytea([0xAB, 0x01]).wireText() == "\\xab01")
        let large = [UInt8](repeating: 0x7F, count: 300_000)
        #expect(try PostgresValue.bytea(large).wireText()?.utf8.count == 600_002)
    }
}
