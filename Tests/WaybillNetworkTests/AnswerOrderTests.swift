import Foundation
import Synchronization
import Testing
import WaybillTesting

@testable import WaybillNetwork

#if canImport(Glibc)
    import Glibc
#endif

/// A write's frames leave before its HTTP answer (`ServerCore.woken`): the drivers' news is not
/// behind the writer's answer on the wire — unless they go to more sockets than
/// `ServerCore.framesFirstUpTo` (a dispatcher group's fan-out), whose flush would hold the answer
/// for milliseconds. Which left first is read from the kernel's receive timestamps
/// (`SO_TIMESTAMPNS`) of the client sockets: on loopback each `send` is stamped as the server makes
/// it, so the order of the stamps is the order of the sends.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct AnswerOrderTests {
    /// Sends a frame to `socket` from inside its request, like a commit whose events the hub
    /// delivers, after holding the service thread so that the frame and the answer are handled in
    /// one pass (the order in which a write's posts arrive: events, then the answer).
    final class FrameThenAnswer: HTTPResponder {
        let target = Mutex<(HTTPServer, [SocketID])?>(nil)

        func respond(to request: HTTPRequest) async -> HTTPResponse {
            guard let (server, sockets) = target.withLock({ $0 }) else { return HTTPResponse(status: 500) }
            // Waits (briefly: one post to an idle loop) until the hold has begun, so the two posts
            // below cannot be split across passes with the frame's flushed in the first. The hold
            // lasts until both are queued behind it (up to 10 s: a busy runner may keep this
            // thread from making them for a while).
            let held = DispatchSemaphore(value: 0)
            let loop = server.core.loop
            _ = server.execute { _ in
                held.signal()
                let deadline = ContinuousClock.now + .seconds(10)
                while loop.queuedWorkCount < 2, ContinuousClock.now < deadline { usleep(1_000) }
            }
            held.wait()
            let frame = OutboundFrame(text: "event")
            _ = server.execute { io in
                for socket in sockets { io.send(frame, to: socket) }
            }
            return HTTPResponse(status: 200, body: Array("answer".utf8))
        }
    }

    @Test func theFramesOfAWriteLeaveBeforeItsAnswer() async throws {
        let responder = FrameThenAnswer()
        let delegate = RecordingDelegate()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(configuration: configuration, responder: responder, webSocketDelegate: delegate)
        try server.start()
        do {
            let (driver, socket) = try await openRawWebSocket(port: server.port, seenBy: delegate)
            responder.target.withLock { $0 = (server, [socket]) }

            let (frameStamp, answerStamp, status, text) = try await runBlocking {
                () -> (timespec, timespec, Int, String) in
                let writer = try RawConnection(port: server.port)
                for connection in [driver, writer] { try stampReceives(connection.fileDescriptor) }
                try writer.send(RawConnection.request("POST", "/write", body: Array("{}".utf8)))
                let frame = try receiveStamp(driver.fileDescriptor)
                let answer = try receiveStamp(writer.fileDescriptor)
                let status = try writer.readResponse().status
                let text = try String(decoding: driver.readDataOrCloseFrame().payload, as: UTF8.self)
                return (frame, answer, status, text)
            }
            #expect(status == 200 && text == "event")
            let frameNanos = Int64(frameStamp.tv_sec) * 1_000_000_000 + Int64(frameStamp.tv_nsec)
            let answerNanos = Int64(answerStamp.tv_sec) * 1_000_000_000 + Int64(answerStamp.tv_nsec)
            #expect(frameNanos > 0 && answerNanos > 0, "the kernel stamped both")
            #expect(frameNanos < answerNanos, "the frame left \(frameNanos - answerNanos) ns after the answer")
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }
}

extension AnswerOrderTests {
    /// Frames of one pass for more sockets than `framesFirstUpTo`: the answer leaves first, so the
    /// writer's next request arrives while they are flushed and shares the next commit and send
    /// with others (fan-out to 1 000 sockets: +17 % frames/s, docs/BENCHMARKS.md, section
    /// "2026-12-07 (13:50– UTC)"). Up to `framesFirstUpTo` sockets, the frames still go first.
    @Test(arguments: [ServerCore.framesFirstUpTo, ServerCore.framesFirstUpTo + 1], EventLoopKind.allCases)
    func theAnswerLeavesBeforeTheFramesOfALargeFanOut(sockets count: Int, kind: EventLoopKind) async throws {
        let responder = FrameThenAnswer()
        let delegate = RecordingDelegate()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.eventLoop = kind
        let server = HTTPServer(configuration: configuration, responder: responder, webSocketDelegate: delegate)
        try server.start()
        do {
            let port = server.port
            let drivers = try await runBlocking { () -> [RawConnection] in
                try (0..<count).map { _ in
                    let c = try RawConnection(port: port)
                    _ = try c.upgradeToWebSocket("/ws/orders/")
                    return c
                }
            }
            try #require(await eventually { delegate.openedSockets.count == count })
            responder.target.withLock { $0 = (server, delegate.openedSockets) }

            let (frameStamps, answerStamp, status) = try await runBlocking { () -> ([Int64], Int64, Int) in
                let writer = try RawConnection(port: port)
                for connection in drivers + [writer] { try stampReceives(connection.fileDescriptor) }
                try writer.send(RawConnection.request("POST", "/write", body: Array("{}".utf8)))
                let frames = try drivers.map { try nanoseconds(receiveStamp($0.fileDescriptor)) }
                let answer = try nanoseconds(receiveStamp(writer.fileDescriptor))
                return (frames, answer, try writer.readResponse().status)
            }
            #expect(status == 200)
            #expect(answerStamp > 0 && frameStamps.allSatisfy { $0 > 0 }, "the kernel stamped them all")
            let early = frameStamps.filter { $0 < answerStamp }.count
            if count > ServerCore.framesFirstUpTo {
                #expect(early == 0, "\(early) of \(count) frames left before the answer")
            } else {
                #expect(early == count, "\(count - early) of \(count) frames left after the answer")
            }
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }
}

private func nanoseconds(_ stamp: timespec) -> Int64 { Int64(stamp.tv_sec) * 1_000_000_000 + Int64(stamp.tv_nsec) }

private struct SocketCallFailed: Error { let call: String, code: Int32 }

/// Asks the kernel to stamp every packet this socket receives.
private func stampReceives(_ fd: Int32) throws {
    var on: Int32 = 1
    guard setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, &on, socklen_t(MemoryLayout<Int32>.size)) == 0 else {
        throw SocketCallFailed(call: "setsockopt", code: errno)
    }
}

/// Waits (≤ 20 s: a runner busy with the parallel suite starves the responder for seconds) until `fd` has data, and returns the kernel's receive stamp of it without
/// consuming it (`MSG_PEEK`): the `SCM_TIMESTAMPNS` control message.
private func receiveStamp(_ fd: Int32) throws -> timespec {
    var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
    guard poll(&entry, 1, 20_000) == 1 else { throw SocketCallFailed(call: "poll", code: errno) }
    var byte: UInt8 = 0
    var control = [UInt8](repeating: 0, count: 128)
    let received = withUnsafeMutablePointer(to: &byte) { bytePointer in
        control.withUnsafeMutableBytes { controlBytes in
            var vector = iovec(iov_base: UnsafeMutableRawPointer(bytePointer), iov_len: 1)
            return withUnsafeMutablePointer(to: &vector) { vectorPointer in
                var message = msghdr()
                message.msg_iov = vectorPointer
                message.msg_iovlen = 1
                message.msg_control = controlBytes.baseAddress
                message.msg_controllen = controlBytes.count
                let count = recvmsg(fd, &message, Int32(MSG_PEEK))
                return count < 0 ? -1 : message.msg_controllen
            }
        }
    }
    guard received > 0 else { throw SocketCallFailed(call: "recvmsg", code: errno) }
    // struct cmsghdr { size_t len; int level; int type; } then the data, aligned to size_t.
    var offset = 0
    let levelAt = MemoryLayout<Int>.size, typeAt = levelAt + MemoryLayout<Int32>.size
    let header = typeAt + MemoryLayout<Int32>.size
    while offset + header <= received {
        let length = control.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: Int.self) }
        let level = control.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + levelAt, as: Int32.self) }
        let type = control.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + typeAt, as: Int32.self) }
        if level == SOL_SOCKET, type == SO_TIMESTAMPNS {
            return control.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset + header, as: timespec.self) }
        }
        guard length >= header else { break }
        offset += (length + 7) & ~7
    }
    throw SocketCallFailed(call: "recvmsg: no SCM_TIMESTAMPNS", code: 0)
}
