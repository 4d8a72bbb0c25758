import Foundation
import Synchronization
import Testing

@testable import WaybillNetwork
import WaybillTesting

/// A WebSocket upgrade lws would drop without a word (measured against lws 4.1.6: no
/// `Sec-WebSocket-Key`, or subprotocols offered without `waybill`) gets a 400 that says why, and
/// the connection closes; a valid one still opens.
@Suite(.timeLimit(.minutes(1)))
struct UpgradeRefusalTests {
    private static func upgrade(_ extra: String) -> String {
        "GET /ws/orders/ HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" + extra + "\r\n"
    }

    private static let key = "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"

    @Test(arguments: [
        ("Sec-WebSocket-Version: 13\r\n", "Sec-WebSocket-Key"),
        (key + "Sec-WebSocket-Protocol: other\r\n", "waybill"),
        (key + "Sec-WebSocket-Protocol: other, chat\r\n", "waybill"),
        (key + "Sec-WebSocket-Protocol: way bill\r\n", "waybill"),
    ])
    func anUpgradeLwsWouldDropGetsA400SayingWhy(extra: String, named: String) async throws {
        let statuses = StatusRecorder()
        var configuration = HTTPServerConfiguration()
        configuration.port = 0
        let server = HTTPServer(configuration: configuration, responder: EchoResponder(), webSocketDelegate: RecordingDelegate())
        server.observeOwnAnswers { status in statuses.add(status) }
        try server.start()
        do {
            let (response, closed) = try await answerAndClose(Self.upgrade(extra), port: server.port)
            #expect(response.status == 400)
            let body = String(decoding: response.body, as: UTF8.self)
            #expect(body.contains("\"bad_upgrade\"") && body.contains(named), "\(body)")
            #expect(closed)
            #expect(statuses.all == [400], "counted with the network layer's own answers")
        } catch {
            await server.shutdown()
            throw error
        }
        await server.shutdown()
    }

    @Test(arguments: [
        "", "Sec-WebSocket-Protocol: other, waybill\r\n", "Sec-WebSocket-Protocol: waybill\r\n",
        "Sec-WebSocket-Protocol: waybill,\r\n", "Sec-WebSocket-Protocol: \tother ,waybill \r\n",
    ])
    func aValidUpgradeStillOpens(protocols: String) async throws {
        let delegate = RecordingDelegate()
        try await withServer(delegate: delegate) { server in
            let head = try await runBlocking { () -> String in
                let c = try RawConnection(port: server.port)
                try c.send(Self.upgrade(Self.key + protocols))
                return try c.readLine()
            }
            #expect(head.hasPrefix("HTTP/1.1 101"), "\(head)")
            #expect(await eventually { delegate.openedSockets.count == 1 })
        }
    }
}

/// The statuses `observeOwnAnswers` reports.
private final class StatusRecorder: Sendable {
    private let statuses = Mutex<[Int]>([])
    func add(_ status: Int) { statuses.withLock { $0.append(status) } }
    var all: [Int] { statuses.withLock { $0 } }
}
