import Testing

@testable import WaybillJSON

/// `JSONReader`: RFC 8259 JSON from bytes, strictly (request bodies; docs/BENCHMARKS.md,
/// "JSONDecoder in the write path").
@Suite struct JSONReaderTests {
    private static func parse(_ text: String) throws(JSONSyntaxError) -> JSONValue { try JSONReader.parse(Array(text.utf8)) }

    private static func object(_ members: (String, JSONValue)...) -> JSONValue {
        .object(members.map { JSONValue.Member(key: $0.0, value: $0.1) })
    }

    @Test func readsEveryKindOfValue() throws {
        #expect(try Self.parse("null") == .null)
        #expect(try Self.parse("true") == .bool(true))
        #expect(try Self.parse("false") == .bool(false))
        #expect(try Self.parse("42") == .integer(42))
        #expect(try Self.parse("\"text\"") == .string("text"))
        #expect(try Self.parse("[]") == .array([]))
        #expect(try Self.parse("{}") == .object([]))
        #expect(try Self.parse("[1,\"a\",null,[true],{}]") == .array([.integer(1), .string("a"), .null, .array([.bool(true)]), .object([])]))
        #expect(
            try Self.parse(#"{"b":1,"a":{"c":[false]},"":"empty key"}"#)
                == Self.object(("b", .integer(1)), ("a", Self.object(("c", .array([.bool(false)])))), ("", .string("empty key"))))
    }

    /// `maximumValues` counts every value at any depth (the array itself too) and stops parsing
    /// past it: a broker message of millions of zeros is refused before its tree is built.
    @Test func aDocumentWithMoreValuesThanAllowedIsRefused() throws {
        let bytes = Array(#"[1,[2,3],{"a":4}]"#.utf8)  // 7 values: the arrays, the object, 4 numbers
        #expect(try JSONReader.parse(bytes, maximumValues: 7) == JSONReader.parse(bytes))
        #expect(throws: JSONSyntaxError.self) { try JSONReader.parse(bytes, maximumValues: 6) }
        let zeros = Array(("[" + Array(repeating: "0", count: 1_000_000).joined(separator: ",") + "]").utf8)
        // A Bool, so a failure does not print a million values.
        let refused = (try? JSONReader.parse(zeros, maximumValues: 1_000)) == nil
        #expect(refused)
    }

    @Test func keepsMembersInOrderWithDuplicates() throws {
        // `BodyFields` takes the first; the tree keeps them all, in document order.
        #expect(try Self.parse(#"{"z":1,"a":2,"z":"x"}"#) == Self.object(("z", .integer(1)), ("a", .integer(2)), ("z", .string("x"))))
    }

    @Test func skipsWhitespaceAndOneByteOrderMark() throws {
        #expect(try Self.parse(" \t\r\n{ \"a\" :\n[ 1 ,\t2 ] }\r\n ") == Self.object(("a", .array([.integer(1), .integer(2)]))))
        #expect(try JSONReader.parse([0xEF, 0xBB, 0xBF] + Array("{}".utf8)) == .object([]))
        #expect(try JSONReader.parse([0xEF, 0xBB, 0xBF, 0x20] + Array("1".utf8)) == .integer(1))
    }

    @Test func decodesEveryEscape() throws {
        #expect(try Self.parse(#""\"\\\/\b\f\n\r\t""#) == .string("\"\\/\u{08}\u{0C}\n\r\t"))
        #expect(try Self.parse(#""\u0041\u00e9\u00E9\u20ac\u0000\u001F""#) == .string("Aéé€\u{0}\u{1F}"))
        #expect(try Self.parse(#""a\nb\u0063d""#) == .string("a\nbcd"))
        #expect(try Self.parse(#""é \u00e9 🚚""#) == .string("é é 🚚"))
    }

    @Test func combinesSurrogatePairs() throws {
        #expect(try Self.parse(#""\ud83d\ude9a""#) == .string("🚚"))
        #expect(try Self.parse(#""\uD834\uDD1E!""#) == .string("𝄞!"))
        #expect(try Self.parse(#""\ud800\udc00\udbff\udfff""#) == .string("\u{10000}\u{10FFFF}"))
    }

    @Test(arguments: [
        ("0", JSONValue.integer(0)), ("-0", .integer(0)), ("7", .integer(7)), ("-12", .integer(-12)),
        ("1.0", .integer(1)), ("-0.0", .integer(0)), ("1e2", .integer(100)), ("1E+2", .integer(100)),
        ("2.50e1", .integer(25)), ("100e-2", .integer(1)), ("0.0000", .integer(0)), ("0e99999999999999999999", .integer(0)),
        ("9223372036854775807", .integer(.max)), ("-9223372036854775808", .integer(.min)),
        ("922337203685477580.7e1", .integer(.max)), ("-9223372036854775808.000", .integer(.min)),
        ("12345678901234567890e-1", .integer(1_234_567_890_123_456_789)),
        ("0.000000000000000000000000000001e30", .integer(1)), ("9007199254740993.0", .integer(9_007_199_254_740_993)),
        ("1.5", .number("1.5")), ("-0.5", .number("-0.5")), ("1e400", .number("1e400")), ("1e-400", .number("1e-400")),
        ("9223372036854775808", .number("9223372036854775808")), ("-9223372036854775809", .number("-9223372036854775809")),
        ("1e19", .number("1e19")), ("1.0000000000000001", .number("1.0000000000000001")),
        ("1e99999999999999999999", .number("1e99999999999999999999")), ("15e-1", .number("15e-1")),
        ("123456789012345678901234567890", .number("123456789012345678901234567890")),
    ])
    func readsNumbersExactly(text: String, value: JSONValue) throws {
        #expect(try Self.parse(text) == value)
        #expect(try Self.parse("[\(text)]") == .array([value]))
    }

    @Test func nestsUpToTheDepthLimit() throws {
        let limit = JSONReader.maximumDepth
        let deepest = String(repeating: "[", count: limit) + String(repeating: "]", count: limit)
        #expect(throws: Never.self) { try Self.parse(deepest) }
        #expect(throws: JSONSyntaxError()) { try Self.parse("[" + deepest + "]") }
        let objects = String(repeating: #"{"a":"#, count: limit) + "1" + String(repeating: "}", count: limit)
        #expect(throws: Never.self) { try Self.parse(objects) }
        #expect(throws: JSONSyntaxError()) { try Self.parse(#"{"a":"# + objects + "}") }
        // Depth is nesting, not a count of containers.
        let wide = "[" + Array(repeating: "[[]]", count: limit * 2).joined(separator: ",") + "]"
        #expect(throws: Never.self) { try Self.parse(wide) }
    }

    static let malformedTexts: [String] = [
        "", " ", "\n", "{", "}", "[", "]", "[1", "{\"a\"", "{\"a\":", "{\"a\":1", "\"abc", "[1,]", "{\"a\":1,}", "[,]", "{,}",
        "[1,,2]", "{\"a\":1,,\"b\":2}", "[1 2]", "{\"a\" 1}", "{\"a\":}", "{:1}", "{1:2}", "{a:1}", "{'a':1}", "'a'",
        "{\"a\":1 \"b\":2}", "tru", "True", "nul", "nulll", "falsey", "undefined", "NaN", "Infinity", "-Infinity",
        "01", "-01", "00", "-", "1.", ".5", "+1", "1e", "1e+", "1E-", "0x10", "1_000", "1.e3", "--1", "1.5.5",
        "\"\\x\"", "\"\\u12\"", "\"\\u12G4\"", "\"\\U0041\"", "\"\\\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\ud800\\u0041\"",
        "\"\\ud800x\"", "\"\\ud800\\\\\"", "\"\\udfff\\ud800\"", "\"a\tb\"", "\"a\nb\"", "\"a\u{01}b\"", "\"\u{1F}\"",
        "{} x", "{}{}", "1 2", "[] ,", "{}\u{0}", "{}\u{0C}", "\u{0C}{}", "\u{0B}{}", "{}\u{A0}", "/*c*/{}", "{} // c",
        "{\"a\":1}}", "[]]", "\u{FEFF}\u{FEFF}{}", "{\"\\q\":1}",
    ]

    @Test(arguments: malformedTexts)
    func refusesMalformedText(text: String) {
        #expect(throws: JSONSyntaxError()) { try Self.parse(text) }
    }

    static let malformedBytes: [[UInt8]] = [
        [0x22, 0xFF, 0x22],  // not UTF-8 at all
        [0x22, 0xC0, 0x80, 0x22],  // overlong NUL
        [0x22, 0xC3, 0x22],  // truncated sequence
        [0x22, 0xE2, 0x82, 0x22],  // truncated sequence
        [0x22, 0xED, 0xA0, 0x80, 0x22],  // a surrogate encoded in UTF-8
        [0x22, 0xF4, 0x90, 0x80, 0x80, 0x22],  // past U+10FFFF
        [0x22, 0x5C, 0x6E, 0xFF, 0x22],  // invalid UTF-8 after an escape
        [0x7B, 0x22, 0xFF, 0x22, 0x3A, 0x31, 0x7D],  // in a key
        [0xEF, 0xBB],  // half a byte order mark
        [0xEF, 0xBB, 0xBF],  // a byte order mark and nothing else
        [0xFF, 0xFE, 0x7B, 0x00, 0x7D, 0x00],  // UTF-16: SPEC §2 says UTF-8
        [0x7B, 0x00, 0x7D, 0x00],
        [0x5B, 0x31, 0x5D, 0x00],  // NUL after the value
    ]

    @Test(arguments: malformedBytes)
    func refusesMalformedBytes(bytes: [UInt8]) {
        #expect(throws: JSONSyntaxError()) { try JSONReader.parse(bytes) }
    }
}
