import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

#if canImport(Glibc)
    import Glibc
#endif

@Suite(.serialized, .timeLimit(.minutes(1)))
struct WebSocketTests {
    let loop: WebSocketClientLoop

    init() throws { loop = try WebSocketClientLoop() }

    /// A client on this suite's loop, connected to `server` at `path`.
    func connect(to server: HTTPServer, path: String = "/ws/orders/") async throws -> WebSocketClient {
        try await WebSocketClient.connect(host: "127.0.0.1", port: server.port, path: path, on: loop, timeout: .seconds(20))
    }

    @Test func echoThroughTheClientAndCleanClose() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let baseline = server.liveSessionObjects
            let client = try await WebSocketClient.connect(
                host: "localhost",
                port: server.port,
                path: "/ws/orders/?token=abc&since=5",
                headers: [("Authorization", "Bearer t1")],
                on: loop, timeout: .seconds(20))
            client.send(text: "héllo")
            #expect(await nextEvent(client) == .text("héllo"))
            let socket = try #require(delegate.openedSockets.first)
            #expect(
                delegate.events.first
                    == .opened(
                        socket,
                        path: "/ws/orders/",
                        query: ["token=abc", "since=5"],
                        authorization: "Bearer t1"
                    )
            )
            client.close(code: 1000, reason: "bye")
            #expect(await nextEvent(client) == .closed(code: 1000, reason: "bye"))
            #expect(await eventually { delegate.closeReport(for: socket) != nil })
            #expect(delegate.closeReport(for: socket) == WebSocketClose(code: 1000, initiatedByServer: false))
            #expect(await eventually { server.liveSessionObjects == baseline })
        }
        loop.shutdown()
    }

    @Test func serverCloseCodeReachesTheClient() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let client = try await connect(to: server, path: "/ws/orders/")
            client.send(text: "first")
            client.send(text: "close:4001")
            #expect(await nextEvent(client) == .text("first"))
            #expect(await nextEvent(client) == .closed(code: 4001, reason: "closed by test"))
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket) != nil })
            #expect(delegate.closeReport(for: socket) == WebSocketClose(code: 4001, initiatedByServer: true))
        }
        loop.shutdown()
    }

    @Test func oversizeMessageClosesWith1009() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxMessageBytes = 1000 }, delegate: delegate) { server in
            let client = try await connect(to: server, path: "/ws/orders")
            client.send(text: String(repeating: "x", count: 5000))
            #expect(
                await nextEvent(client, where: { if case .closed = $0 { true } else { false } })
                    == .closed(code: 1009, reason: "message too big")
            )
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket)?.code == 1009 })
        }
        loop.shutdown()
    }

    @Test func binaryMessagesAreDeliveredBothWays() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let client = try await connect(to: server, path: "/ws/orders/")
            let payload = (0..<60_000).map { UInt8($0 % 256) }  // under maxMessageBytes (64 KiB)
            client.send(binary: payload)
            let echoed = await nextEvent(client) == .binary(payload)
            #expect(echoed)
            let socket = try #require(delegate.openedSockets.first)
            let received = delegate.events.contains(.binary(socket, payload))
            #expect(received)
        }
        loop.shutdown()
    }

    @Test func fragmentedMessageIsReassembled() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let port = server.port
            let echo = try await runBlocking {
                let c = try RawConnection(port: port)
                #expect(try c.upgradeToWebSocket("/ws/orders/").status == 101)
                try c.sendFrame(.text, Array("hel".utf8), fin: false)
                try c.sendFrame(.continuation, Array("lo ".utf8), fin: false)
                try c.sendFrame(.ping, [])  // control frames may sit between fragments
                try c.sendFrame(.continuation, Array("world".utf8))
                return try c.readDataOrCloseFrame()
            }
            #expect(echo.opcode == .text)
            #expect(echo.text == "hello world")
            let socket = try #require(delegate.openedSockets.first)
            #expect(delegate.events.contains(.text(socket, "hello world")))
        }
        loop.shutdown()
    }

    /// Fragments of one message that never ends (empty ones add no bytes, and only a complete
    /// message is counted against the hub's frame budget) close the socket with 1008; 63 fragments
    /// and a final one still make a message.
    @Test func aMessageInTooManyFragmentsClosesWith1008() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let port = server.port
            let (echo, close) = try await runBlocking {
                let c = try RawConnection(port: port)
                #expect(try c.upgradeToWebSocket("/ws/orders/").status == 101)
                try c.sendFrame(.text, Array("a".utf8), fin: false)
                for _ in 0..<62 { try c.sendFrame(.continuation, [], fin: false) }
                try c.sendFrame(.continuation, Array("b".utf8))
                let echo = try c.readDataOrCloseFrame()
                try c.sendFrame(.text, [], fin: false)
                for _ in 0..<10_000 { try c.sendFrame(.continuation, [], fin: false) }
                return (echo, try c.readDataOrCloseFrame())
            }
            #expect(echo.text == "ab")
            #expect(close.opcode == .close)
            #expect(close.payload.prefix(2) == [0x03, 0xF0])  // 1008
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket)?.code == 1008 })
        }
        loop.shutdown()
    }

    /// Pongs never reach the hub's frame budget: a stream of them (a payload each, so lws reports
    /// them) closes the socket with 1008 past `maxPongs(perPing:)` between two heartbeat pings, while
    /// that many are still fine.
    @Test func aStreamOfPongsClosesWith1008() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(60) }, delegate: delegate) { server in
            let port = server.port, allowed = Int(ServerCore.maxPongs(perPing: .seconds(60)))
            let (echo, close) = try await runBlocking {
                let c = try RawConnection(port: port)
                #expect(try c.upgradeToWebSocket("/ws/orders/").status == 101)
                for _ in 0..<allowed { try c.sendFrame(.pong, Array("x".utf8)) }
                try c.sendFrame(.text, Array("still open".utf8))
                let echo = try c.readDataOrCloseFrame()
                for _ in 0..<1_000 { try c.sendFrame(.pong, Array("x".utf8)) }
                return (echo, try c.readDataOrCloseFrame())
            }
            #expect(echo.text == "still open")
            #expect(close.opcode == .close)
            #expect(close.payload.prefix(2) == [0x03, 0xF0])  // 1008
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket)?.code == 1008 })
        }
        loop.shutdown()
        // One a second, unsolicited, stays within the cap at any interval.
        #expect(ServerCore.maxPongs(perPing: .seconds(25)) == 100)
        #expect(ServerCore.maxPongs(perPing: .seconds(300)) == 1_200)
        #expect(ServerCore.maxPongs(perPing: .seconds(1_000_000)) == UInt16.max)
    }

    /// At the largest bound (a ping interval of 4.5 hours or more, through the library's
    /// configuration) the pong past it closes with 1008 too: the count trapped on its increment,
    /// which took the whole process down (found by a review, 2026-12-07).
    @Test func pongsPastTheLargestBoundCloseWith1008() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(20_000) }, delegate: delegate) { server in
            let port = server.port
            #expect(ServerCore.maxPongs(perPing: .seconds(20_000)) == UInt16.max)
            let close = try await runBlocking {
                let c = try RawConnection(port: port)
                #expect(try c.upgradeToWebSocket("/ws/orders/").status == 101)
                var batch: [UInt8] = []
                for _ in 0...Int(UInt16.max) { batch += RawConnection.maskedFrame(.pong, [0x78]) }
                try c.send(batch)
                return try c.readDataOrCloseFrame()
            }
            #expect(close.opcode == .close)
            #expect(close.payload.prefix(2) == [0x03, 0xF0])  // 1008
        }
        loop.shutdown()
    }

    @Test func slowConsumerIsClosedWith4008() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxQueuedBytesPerSocket = 256 << 10 }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, receiveBufferSize: 4096, seenBy: delegate)
            let frame = OutboundFrame(binary: [UInt8](repeating: 7, count: 32 << 10))
            // Keep sending (the peer never reads) until the server gives up on the socket.
            let deadline = ContinuousClock.now + .seconds(20)
            while delegate.closeReport(for: socket) == nil && ContinuousClock.now < deadline {
                server.execute { io in
                    for _ in 0..<32 { io.send(frame, to: socket) }
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let report = try #require(delegate.closeReport(for: socket))
            #expect(report.wasSlowConsumer)
            #expect(report.initiatedByServer)
            #expect(report.code == 4008)
            withExtendedLifetime(raw) {}
        }
        loop.shutdown()
    }

    /// A close asked for while lws still holds the tail of the last frame (the peer reads slowly)
    /// goes out after that tail, with its code: closing at once, lws flushed the tail and then
    /// dropped the connection without the close frame, and the peer saw 1006 for the server's
    /// code (found by a review, 2026-12-07).
    @Test func aCloseBehindATailLwsStillHoldsKeepsItsCode() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxQueuedBytesPerSocket = 32 << 20 }, delegate: delegate) { server in
            let (raw, _) = try await Self.openBehindATail(server, seenBy: delegate) { io, socket in
                io.close(socket, code: 4001, reason: "unauthorized")
            }
            let (close, _) = try await runBlocking { try Self.readUntilClose(raw, answering: false) }
            #expect(close.opcode == .close)
            #expect(close.payload.prefix(2) == [0x0F, 0xA1], "4001: \(close.payload.prefix(2))")
        }
        loop.shutdown()
    }

    /// The same for a peer refused from inside its receive callback (here 1009, a message over
    /// the limit): closing at once while lws held a tail, the peer got the tail and then a dropped
    /// connection (1006) instead of the code that says what it did wrong.
    @Test func aRefusalBehindATailLwsStillHoldsKeepsItsCode() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxQueuedBytesPerSocket = 32 << 20; $0.maxMessageBytes = 1000 }, delegate: delegate) {
            server in
            let (raw, socket) = try await Self.openBehindATail(server, seenBy: delegate)
            let (close, read) = try await runBlocking { () -> (RawWebSocketFrame, Int) in
                try raw.sendFrame(.text, [UInt8](repeating: UInt8(ascii: "x"), count: 5000))
                try raw.sendText("after the refusal")  // never delivered
                return try Self.readUntilClose(raw, answering: true)
            }
            #expect(read > 0, "a tail was held: frames came before the close")
            #expect(close.opcode == .close)
            #expect(close.closeCode == 1009)
            #expect(await eventually { delegate.closeReport(for: socket)?.code == 1009 })
            #expect(!delegate.events.contains { if case .text = $0 { true } else { false } })
        }
        loop.shutdown()
    }

    /// While a close waits behind a tail, lws reads nothing more from that peer: reading on, a peer
    /// that keeps its window shut could have the service thread parse what it floods in (pongs,
    /// frames) until the close's 5 s deadline, on every connection it opens. Both ways a close
    /// begins: the peer refused for a rule it broke (1009 here), and the hub's close (4001).
    @Test(arguments: [false, true])
    func aPeerIsNotReadWhileItsCloseWaitsForATail(closedByHub: Bool) async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxQueuedBytesPerSocket = 32 << 20; $0.maxMessageBytes = 1000 }, delegate: delegate) {
            server in
            let (raw, _) = try await Self.openBehindATail(server, seenBy: delegate) { io, socket in
                if closedByHub { io.close(socket, code: 4001, reason: "unauthorized") }
            }
            let (sent, stalled) = try await runBlocking { () -> (Int, Bool) in
                if !closedByHub {
                    try raw.sendFrame(.text, [UInt8](repeating: UInt8(ascii: "x"), count: 5000))  // refused: 1009
                }
                // 64 MB of frames: a server that reads takes them in well under a second; one that
                // does not fills the kernel's buffers (a few MB), and then nothing more goes for a
                // second, well inside the close's 5 s deadline (after which the send would fail
                // instead).
                let fd = raw.fileDescriptor
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                let masked = Self.maskedTextFrame(payloadBytes: 60_000)
                var sent = 0
                while sent < 64 << 20 {
                    let n = masked.withUnsafeBytes { bytes in
                        let start = sent % masked.count
                        return Glibc.send(fd, bytes.baseAddress! + start, masked.count - start, Int32(MSG_NOSIGNAL))
                    }
                    if n > 0 {
                        sent += n
                        continue
                    }
                    guard n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR else { return (sent, false) }
                    var writable = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                    if poll(&writable, 1, 1_000) == 0 { return (sent, true) }  // no progress for 1 s
                }
                return (sent, false)
            }
            #expect(stalled, "the server read on: \(sent) bytes taken")
            #expect(sent < 32 << 20, "\(sent) bytes taken")
            #expect(!delegate.events.contains { if case .text = $0 { true } else { false } })
        }
        loop.shutdown()
    }

    /// How many 1 MiB frames `openBehindATail` queues.
    private static let framesBehindATail = 12

    /// A raw socket (a 4 KiB receive buffer) with `framesBehindATail` frames of 1 MiB queued for it,
    /// 300 ms before this returns: more than the kernel holds for a peer that does not read
    /// (megabytes on loopback), so lws holds a tail of what it wrote. `then` runs on the service
    /// thread right after the frames are queued.
    private static func openBehindATail(
        _ server: HTTPServer, seenBy delegate: RecordingDelegate,
        then: @escaping @Sendable (any SocketIO, SocketID) -> Void = { _, _ in }
    ) async throws -> (raw: RawConnection, socket: SocketID) {
        let (raw, socket) = try await openRawWebSocket(port: server.port, receiveBufferSize: 4096, seenBy: delegate)
        let frame = OutboundFrame(binary: [UInt8](repeating: 7, count: 1 << 20))
        server.execute { io in
            for _ in 0..<framesBehindATail { io.send(frame, to: socket) }
            then(io, socket)
        }
        try await Task.sleep(for: .milliseconds(300))  // the queue being written, lws holding a tail
        return (raw, socket)
    }

    /// Reads data frames until the close frame (answering it with its code when `answering`, the
    /// peer's half of the handshake), and returns that frame and how many data frames came first;
    /// past `framesBehindATail` data frames, the last one read instead.
    private static func readUntilClose(_ raw: RawConnection, answering: Bool) throws -> (RawWebSocketFrame, Int) {
        var read = 0
        while true {
            let next = try raw.readDataOrCloseFrame()
            if next.opcode == .close {
                if answering { try raw.sendFrame(.close, Array(next.payload.prefix(2))) }
                return (next, read)
            }
            read += 1
            guard read <= framesBehindATail else { return (next, read) }
        }
    }

    /// A client's text frame (masked with a zero key, which RFC 6455 allows) of `payloadBytes`.
    private static func maskedTextFrame(payloadBytes: Int) -> [UInt8] {
        precondition(payloadBytes > 125 && payloadBytes <= 0xFFFF)
        return [0x81, 0x80 | 126, UInt8(payloadBytes >> 8), UInt8(payloadBytes & 0xFF), 0, 0, 0, 0]
            + [UInt8](repeating: UInt8(ascii: "y"), count: payloadBytes)
    }

    @Test func halfOpenSocketIsDroppedAfterMissedPings() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(1) }, delegate: delegate) { server in
            // The client end never reads, never answers pings.
            let (raw, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            let start = ContinuousClock.now
            #expect(await eventually(timeout: .seconds(8)) { delegate.closeReport(for: socket) != nil })
            #expect((delegate.openFor(socket) ?? ContinuousClock.now - start) < .seconds(6))
            #expect(delegate.closeReport(for: socket)?.code == nil)
            withExtendedLifetime(raw) {}
        }
        loop.shutdown()
    }

    /// A phone on a slow link reading a long backlog gets the ping only after what the kernel
    /// already held for it: while the ping is still on its way and the peer keeps reading, the
    /// heartbeat waits for its pong instead of dropping it (which made it reconnect and read the
    /// same replay again).
    @Test func aSlowReaderBehindABacklogIsNotDroppedForALatePong() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(2) }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, receiveBufferSize: 4096, seenBy: delegate)
            let frames = 80, frame = OutboundFrame(binary: [UInt8](repeating: 7, count: 8 << 10))
            server.execute { io in
                for _ in 0..<frames { io.send(frame, to: socket) }
            }
            // About 80 KB/s: the 640 KB take 8 s; the ping of the first turn (2 s) waits behind
            // what the kernel holds (on loopback, megabytes), so it comes turns late.
            let (read, pingAfter) = try await runBlocking { () -> (Int, Int?) in
                var read = 0
                var pingAfter: Int?
                while read < frames {
                    if try raw.readAnsweringPings().pings > 0, pingAfter == nil { pingAfter = read }
                    read += 1
                    Thread.sleep(forTimeInterval: 0.1)
                }
                if pingAfter == nil {
                    let ping = try raw.readFrame()
                    if ping.opcode == .ping {
                        try raw.sendFrame(.pong, ping.payload)
                        pingAfter = read
                    }
                }
                return (read, pingAfter)
            }
            #expect(read == frames)
            #expect((pingAfter ?? 0) >= frames / 2)  // the case this is about: the ping came late
            #expect(delegate.closeReport(for: socket) == nil)
            // Two more turns: the pong counted, and the socket is pinged and answers as usual.
            async let last = runBlocking { try raw.readAnsweringPings() }
            try await Task.sleep(for: .seconds(4.5))
            server.execute { io in io.send(OutboundFrame(text: "still open"), to: socket) }
            let final = try await last
            #expect(final.frame.text == "still open")
            #expect(final.pings >= 1)
            #expect(delegate.closeReport(for: socket) == nil)
        }
        loop.shutdown()
    }

    /// The same backlog to a peer that reads nothing: it makes no progress, so it is dropped at its
    /// next turn without a pong, as a silent peer is.
    @Test func aPeerThatReadsNothingBehindABacklogIsStillDropped() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(1) }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, receiveBufferSize: 4096, seenBy: delegate)
            let frame = OutboundFrame(binary: [UInt8](repeating: 7, count: 8 << 10))
            server.execute { io in
                for _ in 0..<40 { io.send(frame, to: socket) }
            }
            let start = ContinuousClock.now
            #expect(await eventually(timeout: .seconds(8)) { delegate.closeReport(for: socket) != nil })
            #expect((delegate.openFor(socket) ?? ContinuousClock.now - start) < .seconds(6))
            #expect(delegate.closeReport(for: socket)?.code == nil)
            #expect(delegate.closeReport(for: socket)?.wasSlowConsumer == false)
            withExtendedLifetime(raw) {}
        }
        loop.shutdown()
    }

    /// A peer whose kernel takes every frame but whose application never answers (a hung app) on a
    /// live feed: frames sent after the ping do not count as its progress, and a ping with nothing
    /// ahead of it gets no extra interval, so it goes at its next turn as a silent peer does (about
    /// 10 s here; 15 s if either rule were missing). A 5 s interval: with 2 s, the 1.3 s between the
    /// bound and the right answer was less than a busy runner's delays add up to.
    @Test func aHungPeerOnALiveFeedIsStillDropped() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(5) }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            let frame = OutboundFrame(binary: [UInt8](repeating: 7, count: 1024))
            let start = ContinuousClock.now
            while delegate.closeReport(for: socket) == nil, ContinuousClock.now - start < .seconds(20) {
                server.execute { io in io.send(frame, to: socket) }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect((delegate.openFor(socket) ?? ContinuousClock.now - start) < .seconds(12.5))
            #expect(delegate.closeReport(for: socket)?.code == nil)
            #expect(delegate.closeReport(for: socket)?.wasSlowConsumer == false)
            withExtendedLifetime(raw) {}
        }
        loop.shutdown()
    }

    /// A message from the peer proves it alive as a pong does: a client that keeps sending (its own
    /// pings) is not dropped for a pong that waits behind a replay in a proxy.
    @Test func aPeerThatKeepsSendingIsNotDroppedWithoutPongs() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.pingInterval = .seconds(2) }, delegate: delegate) { server in
            let (raw, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            // Never answers a ping; sends a message every 0.5 s for 6.5 s (three turns; a stall of
            // up to about 1.5 s on a busy runner still leaves one message per interval).
            try await runBlocking {
                for _ in 0..<13 {
                    try raw.sendText(#"{"type":"ping"}"#)
                    Thread.sleep(forTimeInterval: 0.5)
                }
            }
            #expect(delegate.closeReport(for: socket) == nil)
            // Silent from now on: dropped as usual.
            #expect(await eventually(timeout: .seconds(12)) { delegate.closeReport(for: socket) != nil })
            #expect(delegate.closeReport(for: socket)?.code == nil)
        }
        loop.shutdown()
    }

    @Test func shutdownClosesSocketsWith1001() async throws {
        let delegate = RecordingDelegate()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: delegate)
        try server.start()
        let clients = try await withThrowingTaskGroup(of: WebSocketClient.self) { group in
            for _ in 0..<3 {
                group.addTask {
                    try await connect(to: server, path: "/ws/orders/")
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(await eventually { delegate.openedSockets.count == 3 })
        await server.shutdown()
        for client in clients {
            #expect(await nextEvent(client) == .closed(code: 1001, reason: "server shutdown"))
        }
        for socket in delegate.openedSockets {
            #expect(delegate.closeReport(for: socket) == WebSocketClose(code: 1001, initiatedByServer: true))
        }
        #expect(server.liveSessionObjects == 0)
        loop.shutdown()
    }

    @Test func connectingToAClosedPortThrows() async throws {
        let closed = try RefusingPort()
        defer { closed.close() }
        let port = closed.port
        await #expect(throws: WebSocketClientError.self) {
            _ = try await WebSocketClient.connect(host: "127.0.0.1", port: port, path: "/ws/orders/", on: loop, timeout: .seconds(20))
        }
        loop.shutdown()
    }

    @Test func droppedClientClosesWith1001() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            var client: WebSocketClient? = try await connect(to: server, path: "/ws/orders/")
            #expect(client != nil)
            client = nil
            #expect(await eventually { delegate.events.contains { if case .closed = $0 { true } else { false } } })
            let socket = try #require(delegate.openedSockets.first)
            #expect(delegate.closeReport(for: socket) == WebSocketClose(code: 1001, initiatedByServer: false))
        }
        loop.shutdown()
    }

    /// One `OutboundFrame` (one allocation) sent to many sockets through `execute`, as the hub does.
    @Test func sharedFrameFansOutToEverySocket() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let port = server.port
            let clients = try await withThrowingTaskGroup(of: WebSocketClient.self) { group in
                for _ in 0..<50 {
                    group.addTask { [loop] in
                        try await WebSocketClient.connect(host: "127.0.0.1", port: port, path: "/ws/orders/", on: loop, timeout: .seconds(20))
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(await eventually { delegate.openedSockets.count == 50 })
            let sockets = delegate.openedSockets
            let frame = OutboundFrame(text: #"{"type":"order_created","event_id":7}"#)
            for _ in 0..<3 {
                server.execute { io in
                    for socket in sockets { #expect(io.send(frame, to: socket)) }
                }
            }
            for client in clients {
                for _ in 0..<3 {
                    #expect(await nextEvent(client) == .text(#"{"type":"order_created","event_id":7}"#))
                }
            }
        }
        loop.shutdown()
    }

    @Test func handshakeThatNeverCompletesTimesOut() async throws {
        let listener = try SilentListener()
        let start = ContinuousClock.now
        do {
            _ = try await WebSocketClient.connect(
                host: "127.0.0.1",
                port: listener.port,
                path: "/ws/orders/",
                on: loop,
                timeout: .milliseconds(500)
            )
            Issue.record("connected to a silent listener")
        } catch let error as WebSocketClientError {
            #expect(error.code == .timedOut)
        }
        // The 500 ms, not some later timeout of lws's; with room for a test run that starves the
        // cooperative pool for seconds (every hop of the connect and of its timer goes through it).
        #expect(ContinuousClock.now - start < .seconds(8))
        listener.close()
        loop.shutdown()
    }

    @Test func unresolvableHostThrows() async throws {
        await #expect(throws: WebSocketClientError.self) {
            _ = try await WebSocketClient.connect(host: "no-such-host.invalid", port: 80, path: "/", on: loop)
        }
        loop.shutdown()
    }

    @Test func upgradeOnAnUnknownPathIsRefused() async throws {
        try await withServer { server in
            await #expect(throws: WebSocketClientError.self) {
                _ = try await WebSocketClient.connect(host: "127.0.0.1", port: server.port, path: "/nope", on: loop, timeout: .seconds(20))
            }
        }
        loop.shutdown()
    }

    @Test func socketRejectedRightAfterOpeningSeesTheCode() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let client = try await connect(to: server, path: "/ws/orders/?reject=4003")
            #expect(await nextEvent(client) == .closed(code: 4003, reason: "rejected"))
        }
        loop.shutdown()
    }

    @Test func invalidUTF8ClosesWith1007() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let port = server.port
            let frame = try await runBlocking {
                let c = try RawConnection(port: port)
                _ = try c.upgradeToWebSocket("/ws/orders/")
                try c.sendFrame(.text, [0x68, 0xC3, 0x28, 0x69])  // "h", a broken 2-byte sequence, "i"
                return try c.readDataOrCloseFrame()
            }
            #expect(frame.opcode == .close)
            #expect(frame.closeCode == 1007)
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket) != nil })
            #expect(!delegate.events.contains { if case .text = $0 { true } else { false } })
        }
        loop.shutdown()
    }

    /// Idle sockets stay small: resident memory growth per open socket (lws wsi, rx buffer, Swift
    /// state; the raw client side is in this process too, so this overstates the server's share).
    @Test func idleSocketsCostAFewKilobytes() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let port = server.port
            let count = 1000
            let before = heapInUse()
            let sockets = try await runBlocking { () -> [RawConnection] in
                try (0..<count).map { _ in
                    let c = try RawConnection(port: port)
                    _ = try c.upgradeToWebSocket("/ws/orders/")
                    return c
                }
            }
            #expect(await eventually { delegate.openedSockets.count == count })
            let perSocket = (heapInUse() - before) / count
            print("memory per idle socket: \(perSocket) bytes (server and raw client together)")
            #expect(perSocket < 8 << 10)
            withExtendedLifetime(sockets) {}
        }
        loop.shutdown()
    }
}

/// Resident memory of this process (Linux `/proc/self/statm`), in bytes.
private func heapInUse() -> Int {
    let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
    let pages = statm.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
    return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
}
