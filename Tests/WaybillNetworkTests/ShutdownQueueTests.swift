import Foundation
import Testing
@testable import WaybillNetwork
import WaybillTesting

/// Shutdown and the listening socket's queue.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct ShutdownQueueTests {
    /// A connection the kernel completed, but the server had not accepted yet when shutdown began,
    /// is taken in and answered, not reset by the listener's close: its client (nginx) may have
    /// sent its request on it, and a write reset there is answered 502 and never resent (found by
    /// a review).
    @Test func aConnectionQueuedWhenShutdownBeginsIsAnsweredNotReset() async throws {
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        configuration.idleConnectionDrain = .seconds(5)
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: nil)
        try server.start()
        let port = server.port
        let core = server.core
        // The service thread sleeps, then begins the shutdown in the same piece of work: the
        // connection below is queued by the kernel meanwhile and never accepted before it.
        let posted = core.loop.post({ Thread.sleep(forTimeInterval: 0.5); core.beginShutdown() }, bounded: false)
        #expect(posted)
        let answer = try await runBlocking { () -> RawHTTPResponse in
            let c = try RawConnection(port: port)
            try c.send(RawConnection.request("GET", "/queued"))
            return try c.readResponse()
        }
        #expect(answer.status == 200)
        #expect(answer.header("connection") == "close")
        await server.shutdown()
    }
}
