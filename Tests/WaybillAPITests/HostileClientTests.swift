import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// Hostile or broken clients get closed, never crash anything, and leave the server healthy.
@Suite(.timeLimit(.minutes(1)))
struct HostileClientTests {
    /// A raw WebSocket to `/ws/orders/` with a token, past the `connected` frame.
    static func rawSocket(_ server: TestServer, token: String, query: String = "", receiveBuffer: Int? = nil) async throws -> RawConnection {
        let port = server.port
        return try await runBlocking {
            let raw = try RawConnection(port: port, receiveBufferSize: receiveBuffer)
            let upgrade = try raw.upgradeToWebSocket("/ws/orders/?token=\(token)" + (query.isEmpty ? "" : "&" + query))
            guard upgrade.status == 101 else { throw RawConnectionError.closed }
            return raw
        }
    }

    static func closeCode(after frames: [(RawWebSocketFrame.Opcode, [UInt8])], _ raw: RawConnection) async throws -> Int? {
        try await runBlocking {
            for (opcode, payload) in frames { try raw.sendFrame(opcode, payload) }
            while true {
                let frame = try raw.readDataOrCloseFrame()
                if frame.opcode == .close { return frame.closeCode }
            }
        }
    }

    @Test func binaryFrameIsClosedWith1003() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let raw = try await Self.rawSocket(server, token: seed.drivers[0].token)
            #expect(try await Self.closeCode(after: [(.binary, [1, 2, 3])], raw) == 1003)
            #expect(try await server.request("GET", "/healthz").status == 200)
        }
    }

    @Test func oversizeMessageIsClosedWith1009() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let raw = try await Self.rawSocket(server, token: seed.drivers[0].token)
            #expect(try await Self.closeCode(after: [(.text, Array(repeating: 0x61, count: 20_000))], raw) == 1009)
            #expect(try await server.request("GET", "/healthz").status == 200)
        }
    }

    @Test func invalidUTF8IsClosedWith1007() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let raw = try await Self.rawSocket(server, token: seed.drivers[0].token)
            #expect(try await Self.closeCode(after: [(.text, [0xC3, 0x28, 0xFF])], raw) == 1007)
        }
    }

    @Test func garbageBytesOnTheSocketPortLeaveTheServerHealthy() async throws {
        try await TestServer.withRunning { server in
            let port = server.port
            _ = try? await runBlocking {
                let raw = try RawConnection(port: port, timeout: .seconds(2))
                try raw.send(Array(repeating: 0xFF, count: 4096))
                return try raw.readUntilClose()
            }
            _ = try? await runBlocking {
                let raw = try RawConnection(port: port, timeout: .seconds(2))
                try raw.send("GET /ws/orders/ HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
                return try raw.readUntilClose()
            }
            let health = try await server.request("GET", "/healthz")
            #expect(health.status == 200)
        }
    }

    /// A `%` not followed by two hex digits in the target: libwebsockets refuses the request itself
    /// (403, its own small HTML page) before Waybill sees it; nothing reaches a handler, the server
    /// stays healthy (a known limit, docs/HARDENING.md: encode `%` as `%25`).
    @Test(arguments: ["/api/orders/?q=50%", "/api/orders/%ZZ", "/api/orders/?q=%4"])
    func badPercentEncodingIsRefusedBeforeAnyHandler(_ target: String) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let port = server.port, token = seed.dispatcherToken
            let answer = try await runBlocking {
                let raw = try RawConnection(port: port)
                defer { raw.close() }
                try raw.send(RawConnection.request("GET", target, headers: [("Authorization", "Bearer \(token)")]))
                return try raw.readResponse()
            }
            #expect(answer.status == 403)
            // libwebsockets' own page, not Waybill's JSON error: no handler saw the request.
            #expect(answer.header("content-type")?.hasPrefix("text/html") == true)
            #expect(!answer.body.starts(with: Array("{".utf8)))
            let encoded = try await server.request("GET", "/api/orders/?q=50%25", token: token)
            #expect(encoded.status == 200)
            #expect(try await server.request("GET", "/healthz").status == 200)
        }
    }

    /// A client that stops reading while live events keep coming is closed with 4008.
    @Test func socketThatStopsReadingIsClosedWith4008() async throws {
        try await TestServer.withRunning(configure: { $0.maxQueuedBytesPerSocket = 64 << 10 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let driver = UserID(seed.drivers[0].id)
            let raw = try await Self.rawSocket(server, token: seed.drivers[0].token, receiveBuffer: 4096)
            // Admitted and live once `connected` arrives (a fixed pause was a guess on a busy machine:
            // admitted after the write below, the socket would start past those events).
            let hello = try await runBlocking { try raw.readDataOrCloseFrame() }
            #expect(String(decoding: hello.payload, as: UTF8.self).contains(#""type":"connected""#))
            // 4,000 events of ~2 KB for this driver (~8 MB of frames): far more than the kernel buffers hold.
            try await server.store.write { tx in
                let event = OrderEvent(
                    type: .updated, companyID: CompanyID(seed.companyID), orderID: 1, number: String(repeating: "N", count: 2000),
                    oldStatus: .assigned, newStatus: .assigned, driverID: driver, changedAt: Date(), groups: [.driver(driver)])
                _ = try tx.appendEvents(Array(repeating: event, count: 4_000))
            }
            // The client reads nothing until the server has given up on it.
            let counted = try await server.eventually(timeout: .seconds(20)) {
                try await server.request("GET", "/metrics").text.contains("waybill_slow_consumer_closes_total 1")
            }
            #expect(counted)
            let code = try await runBlocking { () -> Int? in
                raw.timeout = .seconds(10)
                do {
                    while true {
                        let frame = try raw.readDataOrCloseFrame()
                        if frame.opcode == .close { return frame.closeCode }
                    }
                } catch RawConnectionError.closed {
                    return nil  // dropped by the hard deadline before the close frame got out
                }
            }
            #expect(code == 4008 || code == nil)
        }
    }

    /// A half-open socket (it never answers protocol pings) is dropped after two missed pings.
    @Test func socketThatIgnoresPingsIsDropped() async throws {
        try await TestServer.withRunning(configure: { $0.pingInterval = .seconds(1) }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let raw = try await Self.rawSocket(server, token: seed.drivers[0].token)
            let dropped = try await runBlocking { () -> Bool in
                raw.timeout = .seconds(10)
                var pings = 0
                while true {  // read without ever answering a ping
                    do {
                        let frame = try raw.readFrame()
                        if frame.opcode == .ping { pings += 1 }
                        if frame.opcode == .close { return pings > 0 }
                    } catch RawConnectionError.closed {
                        return pings > 0
                    }
                }
            }
            #expect(dropped)
        }
    }
}
