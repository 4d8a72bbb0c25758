import Foundation
import Testing
import WaybillNetwork
import WaybillTesting

@testable import WaybillNetwork

/// A small answer leaves in one write (head and body together), which saves a loop round, a
/// `send` and a TCP segment per request; a large one still goes head first, then body pieces.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct HTTPWriteTests {
    @Test(arguments: EventLoopKind.allCases)
    func smallAnswersTakeOneWriteLargeOnesSeveral(kind: EventLoopKind) async throws {
        try await withServer({ $0.eventLoop = kind }) { server in
            let port = server.port
            let before = await server.writeStatistics()
            let small = try await runBlocking { () -> [RawHTTPResponse] in
                let c = try RawConnection(port: port)
                return try (0..<5).map { i in
                    try c.send(RawConnection.request("POST", "/echo", body: Array("body \(i)".utf8)))
                    return try c.readResponse()
                }
            }
            for (i, response) in small.enumerated() {
                #expect(response.status == 200)
                #expect(try Echo(response.body).body == "body \(i)")
            }
            let afterSmall = await server.writeStatistics()
            #expect(afterSmall.httpResponses - before.httpResponses == 5)
            #expect(afterSmall.httpWrites - before.httpWrites == 5)

            let size = 100_000
            let large = try await runBlocking {
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/big?size=\(size)"))
                return try c.readResponse()
            }
            #expect(large.body == (0..<size).map { UInt8($0 % 251) })
            let afterLarge = await server.writeStatistics()
            #expect(afterLarge.httpResponses - afterSmall.httpResponses == 1)
            #expect(afterLarge.httpWrites - afterSmall.httpWrites > 1)
        }
    }
}
