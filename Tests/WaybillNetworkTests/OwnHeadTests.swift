import Foundation
import Testing
import WaybillTesting

@testable import WaybillNetwork

/// A 200 answer with its body to an HTTP/1.1 request has its head written by the server itself
/// (`HTTPSession.writeOKHead`), byte for byte as lws's header calls write it; every other answer
/// (another status, an HTTP/1.0 request, a body sent in parts) still goes through lws.
@Suite(.timeLimit(.minutes(1)))
struct OwnHeadTests {
    private static func head(_ response: HTTPResponse, closing: Bool = false) -> String {
        let room = 512 + response.headers.fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 } + response.body.count
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: room)
        defer { buffer.deallocate() }
        let count = HTTPSession.writeOKHead(
            response, body: response.body, closing: closing, at: buffer,
            isSkipped: { $0 == "content-length" || $0 == "connection" || $0 == "transfer-encoding" })
        return String(decoding: UnsafeBufferPointer(start: buffer, count: count), as: UTF8.self)
    }

    /// The head's lines of the answer to `request`, sent on a new connection (status line first).
    private static func headLines(_ port: Int, _ request: String) throws -> [String] {
        let c = try RawConnection(port: port)
        try c.send(request)
        var lines: [String] = []
        while true {
            let line = try c.readLine()
            if line.isEmpty { break }
            lines.append(line)
        }
        return lines
    }

    /// What lws's calls write: "HTTP/1.1 200 OK", "content-length: " by token, each field as
    /// "name: value", the framing fields of the application left out, a CRLF, the body.
    @Test func theHeadIsWhatLwsWrites() {
        let fields = HTTPHeaders([
            ("Content-Type", "application/json"), ("Content-Length", "999"), ("ETag", "\"v3\""), ("Connection", "keep-alive"),
        ])
        #expect(
            Self.head(HTTPResponse(status: 200, headers: fields, body: Array("{\"a\":1}".utf8)))
                == "HTTP/1.1 200 OK\r\ncontent-length: 7\r\ncontent-type: application/json\r\netag: \"v3\"\r\n\r\n{\"a\":1}")
        #expect(
            Self.head(HTTPResponse(status: 200, body: Array("x".utf8)), closing: true)
                == "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nconnection: close\r\n\r\nx")
        for size in [9, 10, 99, 100, 12_345, 16_384] {
            let text = Self.head(HTTPResponse(status: 200, body: [UInt8](repeating: 0x61, count: size)))
            #expect(text == "HTTP/1.1 200 OK\r\ncontent-length: \(size)\r\n\r\n" + String(repeating: "a", count: size), "\(size) bytes")
        }
    }

    /// An HTTP/1.1 request gets the server's own head; an HTTP/1.0 one lws's, which names its
    /// version (`LwsRequestReader.isHTTP11`), as does an answer other than 200. The lines expected
    /// are lws's: the test passes with the own head turned off, and then counts none.
    @Test func theVersionAndTheStatusDecideWhoWritesTheHead() async throws {
        try await withServer { server in
            let port = server.port
            let before = await server.writeStatistics().ownHeads
            let fields = try await runBlocking { try Self.headLines(port, "GET /fields HTTP/1.1\r\nHost: x\r\n\r\n") }
            #expect(fields.count == 4)
            #expect(fields.first == "HTTP/1.1 200 OK")
            #expect(fields.dropFirst(2) == ["content-type: application/json", "cache-control: no-store"])
            #expect(fields.dropFirst().first?.hasPrefix("content-length: ") == true)
            #expect(await server.writeStatistics().ownHeads == before + 1)
            let (eleven, ten, other) = try await runBlocking { () -> ([String], [String], String) in
                func lines(_ request: String) throws -> [String] { try Self.headLines(port, request) }
                let eleven = try lines("GET /slow?ms=0&size=5 HTTP/1.1\r\nHost: x\r\n\r\n")
                let ten = try lines("GET /slow?ms=0&size=5 HTTP/1.0\r\nHost: x\r\n\r\n")
                let other = try lines("GET /status/any?code=201 HTTP/1.1\r\nHost: x\r\n\r\n").first ?? ""
                return (eleven, ten, other)
            }
            #expect(eleven == ["HTTP/1.1 200 OK", "content-length: 5"])
            #expect(ten.first == "HTTP/1.0 200 OK")
            #expect(ten.contains("content-length: 5"))
            #expect(other == "HTTP/1.1 201 ")
            // Only the HTTP/1.1 200 of these three had the server's own head.
            #expect(await server.writeStatistics().ownHeads == before + 2)
        }
    }
}
