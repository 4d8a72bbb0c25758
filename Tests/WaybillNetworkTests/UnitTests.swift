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

    /// Chunk extensions and trailers carry nothing the server reads: streamed without end they would
    /// never reach the body limit, so they have their own bound.
    @Test func endlessExtensionsOrTrailersAreRefused() {
        let filler = String(repeating: "x", count: ChunkedBodyDecoder.maxIgnoredBytes + 1)
        var extensions = ChunkedBodyDecoder(limit: 100)
        #expect(feed(&extensions, "1;") == .needMore)
        #expect(feed(&extensions, filler) == .tooLarge)
        var trailers = ChunkedBodyDecoder(limit: 100)
        #expect(feed(&trailers, "0\r\n") == .needMore)
        #expect(feed(&trailers, filler + "\r\n") == .tooLarge)
        var modest = ChunkedBodyDecoder(limit: 100)
        #expect(feed(&modest, "1;name=value\r\nx\r\n0\r\nTrailer: yes\r\n\r\n") == .complete)
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

struct WebSocketQueueTests {
    /// A connection whose queue is used on its own (the wsi is never touched by queue operations).
    private func connection() -> WebSocketConnection {
        WebSocketConnection(
            id: SocketID(1), wsi: OpaquePointer(bitPattern: 0x1000)!, request: HTTPRequest(method: "GET", path: "/ws/"),
            counter: LiveObjectCounter(), maxMessageBytes: 1024)
    }

    @Test func anEmptiedQueueKeepsASmallBufferForTheNextFrame() {
        let socket = connection()
        let frame = OutboundFrame(text: "{}")
        socket.enqueue(frame)
        let capacity = socket.queueCapacity
        #expect(capacity >= 1 && capacity <= WebSocketConnection.keptQueueCapacity)
        #expect(socket.dequeue() === frame)
        // Emptied, the buffer stays: the next frame (one per event on most sockets) needs no malloc.
        #expect(!socket.hasQueued && socket.queuedBytes == 0)
        #expect(socket.queueCapacity == capacity)
        socket.enqueue(frame)
        #expect(socket.queueCapacity == capacity)
    }

    @Test func aBufferABurstGrewIsReleasedOnceEmptied() {
        let socket = connection()
        let frames = (0..<40).map { OutboundFrame(text: "{\"n\":\($0)}") }
        for frame in frames { socket.enqueue(frame) }
        #expect(socket.queueCapacity > WebSocketConnection.keptQueueCapacity)
        for frame in frames { #expect(socket.dequeue() === frame) }  // in order, each once
        #expect(socket.dequeue() == nil)
        // An idle socket must not keep what a burst needed.
        #expect(socket.queueCapacity == 0)
    }

    /// `packFront` takes from the front, in order, as many frames as the packer holds, and leaves
    /// the rest queued with their bytes counted; the emptied queue keeps its small buffer.
    @Test func packingTakesFramesFromTheFrontWhileTheyFit() {
        let socket = connection()
        let frames = (0..<5).map { OutboundFrame(text: String(repeating: "a", count: 10 + $0)) }  // 12…16 bytes framed
        for frame in frames { socket.enqueue(frame) }
        #expect(socket.dequeue() === frames[0])
        // A first frame the packer cannot take: nothing is taken.
        #expect(socket.packFront(into: FramePacker(capacity: 12)) == 0)
        #expect(socket.queuedFrameCount == 4 && socket.queuedBytes == 11 + 12 + 13 + 14 && socket.nextFrameCount == 11)
        let packer = FramePacker(capacity: 13 + 14 + 5)  // frames 1 and 2, not 3
        #expect(socket.packFront(into: packer) == 2)
        #expect(packer.packed == [0x81, 11] + Array(repeating: 97, count: 11) + [0x81, 12] + Array(repeating: 97, count: 12))
        #expect(socket.queuedFrameCount == 2)
        #expect(socket.queuedBytes == 13 + 14)
        #expect(socket.nextFrameCount == 13)
        packer.reset()
        #expect(FramePacker(capacity: 1000).canHold(payload: 14))
        let all = FramePacker(capacity: 1000)
        #expect(socket.packFront(into: all) == 2)
        #expect(!socket.hasQueued && socket.queuedBytes == 0 && socket.nextFrameCount == nil)
        #expect(socket.queueCapacity >= 1 && socket.queueCapacity <= WebSocketConnection.keptQueueCapacity)
        #expect(socket.packFront(into: all) == 0)
        // The last frame is moved out of the queue, and the queue stays usable after it.
        socket.enqueue(frames[4])
        #expect(socket.dequeue() === frames[4])
        #expect(socket.dequeue() == nil)
        socket.enqueue(frames[3])
        #expect(socket.queuedFrameCount == 1 && socket.queuedBytes == 13)
    }
}
