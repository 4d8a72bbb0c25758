import Testing

@testable import WaybillNetwork

/// The HTTP client's response parser must refuse a hostile answer, never trap. The `http-response`
/// fuzz target found the signed chunk size ("-2", docs/HARDENING.md, "Fuzzing"); the negative
/// Content-Length next to it traps the same way.
struct ResponseParserTests {
    private func parse(_ text: String) throws -> HTTPClient.Response {
        try ResponseParser.parse(Array(text.utf8), forHEAD: false)
    }

    @Test func aNegativeContentLengthIsAnErrorNotATrap() {
        #expect(throws: HTTPClient.Failure.self) { try parse("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nab") }
    }

    @Test func aSignedOrHugeChunkSizeIsAnErrorNotATrap() {
        for size in ["-5", "+5", "7fffffffffffffff", "ffffffffffffffff"] {
            #expect(throws: HTTPClient.Failure.self) {
                try parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\(size)\r\nabcde\r\n0\r\n\r\n")
            }
        }
    }

    @Test func wellFormedBodiesStillParse() throws {
        #expect(try parse("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}xx").body == Array("{}".utf8))
        let chunked = try parse("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2;x=1\r\n{}\r\nA\r\n0123456789\r\n0\r\n\r\n")
        #expect(chunked.body == Array("{}0123456789".utf8))
    }
}
