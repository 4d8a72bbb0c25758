import Testing

@testable import WaybillNetwork

/// `ServerCore.integer`, the reading of a Content-Length value: digits only, with the blanks HTTP
/// allows around a field value; anything else is nil (the request is then refused with 400).
struct ContentLengthValueTests {
    @Test func digitsWithOptionalBlanksAroundThem() {
        #expect(ServerCore.integer("0") == 0)
        #expect(ServerCore.integer("42") == 42)
        #expect(ServerCore.integer(" 42") == 42)
        #expect(ServerCore.integer("42 \t") == 42)
        #expect(ServerCore.integer("\t 1048576 ") == 1_048_576)
        #expect(ServerCore.integer("007") == 7)
        #expect(ServerCore.integer("999999999999999999") == 999_999_999_999_999_999)
        #expect(ServerCore.integer(String(repeating: " ", count: 28) + "42") == 42)  // 30 bytes: lws reads it too
    }

    @Test func anythingElseIsRefused() {
        for text in [
            "", " ", "-1", "+5", "4 2", "42a", "0x10", "1e3", "4\u{0}2", "\u{A0}42", "４２", "1234567890123456789",
            "42,42", String(repeating: " ", count: 29) + "42", "\t" + String(repeating: "0", count: 29) + "5",
        ] {
            #expect(ServerCore.integer(text) == nil, "\(text.debugDescription)")
        }
    }

    /// The comparison is byte for byte: a no-break space around `chunked`, or a Kelvin sign for its
    /// `k` (lower-cased to `k` by Unicode rules), is another coding (found by a review, 2026-12-07).
    @Test func onlyASCIIChunkedIsChunked() {
        #expect(ServerCore.isLoneChunked("chunked"))
        #expect(ServerCore.isLoneChunked(" \tChunKed\t "))
        #expect(!ServerCore.isLoneChunked("chunked\u{A0}"))
        #expect(!ServerCore.isLoneChunked("chun\u{212A}ed"))
        #expect(!ServerCore.isLoneChunked("chunked,"))
        #expect(!ServerCore.isLoneChunked("xchunked"))
        #expect(!ServerCore.isLoneChunked(""))
    }
}
