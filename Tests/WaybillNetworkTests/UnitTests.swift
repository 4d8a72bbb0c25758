import Testing

@testable import WaybillNetwork

struct ChunkedBodyDecoderTests {
    private func feed(_ decoder: inout ChunkedBodyDecoder, _ text: String) -> ChunkedBodyDecoder.Progress {
        Array(text.utf8).withUnsafeBytes { decoder.feed($0) }
    }

    @Test func decodesAcrossArbitrarySplits() {
        let wire = "5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nT: 1\r\n\r\n"
        for split in 1..<wire.utf8.count {
            var decoder = ChunkedBodyDecoder(limit: 100)
            let bytes = Array(wire.utf8)
            let first = bytes[..<split].withUnsafeBytes { decoder.feed($0) }
            let second = bytes[split...].withUnsafeBytes { decoder.feed($0) }
            #expect(first == (split == bytes.count ? .complete : .needMore))
            #expect(second == .complete)
            #expect(String(decoding: decoder.body, as: UTF8.self) == "hello, world")
        }
    }

    @Test func stopsAtTheLimitAndRejectsGarbage() {
        var small = ChunkedBodyDecoder(limit: 4)
        #expect(feed(&small, "5\r\nhello\r\n0\r\n\r\n") == .tooLarge)
        var bad = ChunkedBodyDecoder(limit: 100)
        #expect(feed(&bad, "zz\r\n") == .malformed)
    }
}

struct LogRedactionTests {
    @Test func tokensAndTicketsAreRedacted() {
        #expect(
            LwsLog.redact("GET /ws/orders/?token=abc123&since=5 failed")
                == "GET /ws/orders/?token=[redacted]&since=5 failed"
        )
        #expect(LwsLog.redact("uri /ws?Ticket=T-1 x") == "uri /ws?Ticket=[redacted] x")
        #expect(LwsLog.redact("mytoken=keep") == "mytoken=keep")
        // The same names as the request log's redaction.
        #expect(LwsLog.redact("/x?access_token=s3&password=p4ss&q=1") == "/x?access_token=[redacted]&password=[redacted]&q=1")
    }
}

struct FrameStorageTests {
    @Test func payloadSitsAfterTheHeadroom() {
        let frame = OutboundFrame(text: "héllo")
        #expect(frame.count == 6)
        #expect(frame.storage.bytes == Array("héllo".utf8))
        #expect(!frame.isBinary)
        #expect(OutboundFrame(binary: []).count == 0)
    }
}
