import Dispatch
import Testing

@testable import WaybillNetwork
import WaybillTesting

/// The network layer's memory bounds: the service thread's work queue and inbound messages on
/// the client (docs/HARDENING.md, items 3 and 7).
@Suite(.serialized, .timeLimit(.minutes(1)))
struct BoundsTests {
    let loop: WebSocketClientLoop

    init() throws { loop = try WebSocketClientLoop() }

    /// While the service thread is stuck, `execute` takes `maxQueuedWork` items and refuses the
    /// rest; once it catches up, every WebSocket is closed with 1013 so its client resumes.
    @Test func workPastTheQueueBoundIsRefusedAndSocketsAreClosedWith1013() async throws {
        let delegate = RecordingDelegate()
        try await withServer({ $0.maxQueuedWork = 4 }, delegate: delegate) { server in
            let client = try await WebSocketClient.connect(host: "127.0.0.1", port: server.port, path: "/ws/orders/", on: loop, timeout: .seconds(20))
            #expect(await eventually { delegate.openedSockets.count == 1 })
            let stuck = DispatchSemaphore(value: 0), entered = DispatchSemaphore(value: 0)
            #expect(server.execute { _ in
                entered.signal()
                _ = stuck.wait(timeout: .now() + 10)
            })
            // Blocking waits stay off the cooperative pool.
            let didEnter = await withCheckedContinuation { c in
                DispatchQueue.global().async { c.resume(returning: entered.wait(timeout: .now() + 5) == .success) }
            }
            #expect(didEnter)
            let accepted = (0..<10).map { _ in server.execute { _ in } }
            #expect(accepted == Array(repeating: true, count: 4) + Array(repeating: false, count: 6))
            #expect(server.refusedWork == 6)
            stuck.signal()
            let socket = try #require(delegate.openedSockets.first)
            #expect(await eventually { delegate.closeReport(for: socket) != nil })
            // (An lws client reads 1013 as 1002: lws rewrites 1012–1014; browsers see 1013.)
            #expect(delegate.closeReport(for: socket) == WebSocketClose(code: 1013, initiatedByServer: true))
            #expect(await nextEvent(client) { if case .closed = $0 { true } else { false } } != nil)
            // The queue drained: work is taken again.
            #expect(server.execute { _ in })
        }
        loop.shutdown()
    }

    /// A client takes messages up to its `maxMessageBytes`; a bigger one closes it with 1009
    /// instead of being buffered.
    @Test func clientClosesWith1009OnAMessageOverItsLimit() async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let client = try await WebSocketClient.connect(
                host: "127.0.0.1", port: server.port, path: "/ws/orders/", on: loop, timeout: .seconds(20), maxMessageBytes: 1000)
            let fits = String(repeating: "a", count: 1000)
            client.send(text: fits)
            #expect(await nextEvent(client) == .text(fits))
            client.send(text: String(repeating: "b", count: 1001))  // echoed back: one byte too many
            #expect(await nextEvent(client) == .closed(code: 1009, reason: "message too big"))
        }
        loop.shutdown()
    }

    /// Durations in the configuration turn into lws's units without losing sub-second values.
    @Test func durationsBecomeHeartbeatTicksAndWholeSeconds() {
        #expect(ServerCore.heartbeatTicks(.seconds(25)) == 250)
        #expect(ServerCore.heartbeatTicks(.milliseconds(1500)) == 15)
        #expect(ServerCore.heartbeatTicks(.zero) == 1)
        // The keep-alive timeout rounds up (a connection is never closed before it), the ping interval to the nearest.
        #expect(ServerCore.heartbeatTicks(.milliseconds(1020)) == 10)
        #expect(ServerCore.heartbeatTicks(.milliseconds(1020), rounding: .up) == 11)
        #expect(ServerCore.wholeSeconds(.milliseconds(1500)) == 2)
        #expect(ServerCore.wholeSeconds(.seconds(5)) == 5)
        #expect(ServerCore.wholeSeconds(.zero) == 1)
    }
}
