import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

/// The server's output path: replies written straight from the callback that caused them, and queued
/// frames packed into few writes, in order and correctly framed.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct WriteBatchingTests {
    @Test func packerFramesEachPayloadWithTheRightHeader() {
        let packer = FramePacker(capacity: 100_000)
        let small = OutboundFrame(text: "hi")
        let medium = OutboundFrame(binary: [UInt8](repeating: 1, count: 300))
        let large = OutboundFrame(text: String(repeating: "x", count: 70_000))
        #expect(packer.append(small) && packer.append(medium) && packer.append(large))
        let bytes = packer.packed
        #expect(Array(bytes[0..<4]) == [0x81, 2, 104, 105])
        #expect(Array(bytes[4..<8]) == [0x82, 126, 0x01, 0x2C])  // 300
        let l = 8 + 300
        #expect(Array(bytes[l..<l + 10]) == [0x81, 127, 0, 0, 0, 0, 0, 0x01, 0x11, 0x70])  // 70 000
        #expect(bytes.count == 4 + 4 + 300 + 10 + 70_000)
        #expect(packer.frameCount == 3)
        #expect(!packer.append(large))  // full: nothing appended
        #expect(packer.frameCount == 3)
        packer.reset()
        #expect(packer.count == 0)
        #expect(!FramePacker(capacity: 100).canHold(payload: large.count))
    }

    /// Thousands of frames of every header size queued in one go reach the peer whole and in order,
    /// in far fewer writes than frames.
    @Test(arguments: EventLoopKind.allCases)
    func manyQueuedFramesArriveInOrderInFewWrites(kind: EventLoopKind) async throws {
        let delegate = RecordingDelegate()
        try await withServer(
            {
                $0.eventLoop = kind
                $0.maxQueuedBytesPerSocket = 16 << 20
            }, delegate: delegate
        ) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            let before = await server.writeStatistics()
            let payloads: [[UInt8]] = (0..<3000).map { i in
                let size = i % 500 == 7 ? 70_000 : (i % 10 == 3 ? 300 : 20)
                return (0..<size).map { UInt8(truncatingIfNeeded: i &+ $0) }
            }
            let frames = payloads.enumerated().map { i, p in
                i % 2 == 0
                    ? OutboundFrame(binary: p)
                    : OutboundFrame(text: String(decoding: p.map { 65 + $0 % 26 }, as: UTF8.self))
            }
            server.execute { io in
                for frame in frames { io.send(frame, to: socket) }
            }
            let received = try await runBlocking { () -> [RawWebSocketFrame] in
                try (0..<frames.count).map { _ in try raw.readDataOrCloseFrame() }
            }
            for (i, frame) in received.enumerated() {
                let expected = i % 2 == 0 ? payloads[i] : payloads[i].map { 65 + $0 % 26 }
                #expect(frame.opcode == (i % 2 == 0 ? .binary : .text), "frame \(i)")
                #expect(frame.fin)
                #expect(frame.payload == expected, "frame \(i)")
                if frame.payload != expected { break }
            }
            let after = await server.writeStatistics()
            #expect(after.frames - before.frames == frames.count)
            #expect(after.sends - before.sends < frames.count / 10)
            withExtendedLifetime(raw) {}
        }
    }

    /// Frames that posted work sends to one socket in one wake-up leave together: one `send()` for the
    /// lot, written right after the drain rather than in a `WRITEABLE` round (the fan-out of a burst of events).
    @Test(arguments: EventLoopKind.allCases)
    func framesPostedTogetherLeaveInOneWrite(kind: EventLoopKind) async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.eventLoop = kind }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            let before = await server.writeStatistics()
            server.execute { io in
                for i in 0..<200 { io.send(OutboundFrame(text: "event \(i)"), to: socket) }
            }
            let texts = try await runBlocking {
                try (0..<200).map { _ in String(decoding: try raw.readDataOrCloseFrame().payload, as: UTF8.self) }
            }
            #expect(texts == (0..<200).map { "event \($0)" })
            let after = await server.writeStatistics()
            #expect(after.frames - before.frames == 200)
            #expect(after.sends - before.sends == 1)
            // One `WRITEABLE` was seen to follow the raw write (lws asks for it); it finds nothing to send.
            #expect(after.writeableCallbacks - before.writeableCallbacks <= 1)
            withExtendedLifetime(raw) {}
        }
    }

    /// Replies made inside the receive callback (a pong to a ping) go out from that callback: no
    /// `WRITEABLE` round trip through the event loop.
    @Test(arguments: EventLoopKind.allCases)
    func repliesLeaveWithoutAWriteableRound(kind: EventLoopKind) async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.eventLoop = kind }, delegate: delegate) { server in
            let port = server.port
            let before = await server.writeStatistics()
            let echoes = try await runBlocking { () -> [String] in
                let c = try RawConnection(port: port)
                _ = try c.upgradeToWebSocket("/ws/orders/")
                return try (0..<50).map { i in
                    try c.sendText("{\"type\":\"ping\",\"n\":\(i)}")
                    return String(decoding: try c.readDataOrCloseFrame().payload, as: UTF8.self)
                }
            }
            #expect(echoes == (0..<50).map { "{\"type\":\"ping\",\"n\":\($0)}" })
            let after = await server.writeStatistics()
            #expect(after.frames - before.frames == 50)
            #expect(after.writeableCallbacks - before.writeableCallbacks == 0)
        }
    }
}
