import Foundation
import Testing
@testable import WaybillNetwork
import WaybillTesting

/// Shutdown and the listening socket's queue.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ShutdownQueueTests {
    /// A connection the kernel completed, but the server had not accepted yet when shutdown began,
    /// is taken in and answered (with idle connections kept) or refused with 503 (without), never
    /// reset by the listener's close: its client (nginx) may have sent its request on it, and a
    /// write reset there is answered 502 and never resent (found by a review).
    @Test(arguments: [(drain: 5, status: 200), (drain: 0, status: 503)])
    func aConnectionQueuedWhenShutdownBeginsIsAnsweredNotReset(drain: Int, status: Int) async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.idleConnectionDrain = .seconds(drain)
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let port = server.port
        let core = server.core
        // The service thread waits, then begins the shutdown in the same piece of work: the
        // connection below is queued by the kernel meanwhile and never accepted before it.
        let connected = DispatchSemaphore(value: 0)
        let posted = core.loop.post({
            _ = connected.wait(timeout: .now() + 30)
            core.beginShutdown()
        }, bounded: false)
        #expect(posted)
        let answer = try await runBlocking { () -> RawHTTPResponse in
            let c = try RawConnection(port: port)
            try c.send(RawConnection.request("GET", "/queued"))
            connected.signal()
            return try c.readResponse()
        }
        #expect(answer.status == status)
        #expect(answer.header("connection") == "close")
        if status == 503 { #expect(answer.text.contains("shutting_down")) }
        await server.shutdown()
    }
}
