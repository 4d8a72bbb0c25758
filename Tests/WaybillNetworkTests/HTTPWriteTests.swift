import Foundation
import Testing
import WaybillNetwork
import WaybillTesting

@testable import WaybillNetwork

/// An answer leaves in one write (head and body together), which saves a loop round, a `send` and
/// a TCP segment per request; lws keeps what the kernel does not take. Only one over
/// `HTTPSession.immediateWriteLimit` goes head first, then body pieces from `HTTP_WRITEABLE`.
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

            var last = afterSmall
            for (size, writes) in [(100_000, 1...1), (HTTPSession.immediateWriteLimit + 1, 2...Int.max)] {
                let large = try await runBlocking {
                    let c = try RawConnection(port: port)
                    try c.send(RawConnection.request("GET", "/big?size=\(size)"))
                    return try c.readResponse()
                }
                #expect(large.body == (0..<size).map { UInt8($0 % 251) })
                let after = await server.writeStatistics()
                #expect(after.httpResponses - last.httpResponses == 1)
                #expect(writes.contains(after.httpWrites - last.httpWrites), "\(size) bytes")
                last = after
            }
        }
    }

    /// Answers are put together in one buffer the server keeps (`WriteScratch`): answers of
    /// every size, one after another on one connection, each come out whole, whether the buffer
    /// grows for one, is reused by a smaller one, or is passed over by one above its kept limit.
    @Test func answersOfEverySizeComeOutWholeFromTheKeptBuffer() async throws {
        try await withServer { server in
            let port = server.port
            let sizes = [10, 5_000, 3, 60_000, 0, WriteScratch.keptLimit + 1, 7, 20_000]
            let answers = try await runBlocking { () -> [RawHTTPResponse] in
                let c = try RawConnection(port: port)
                return try sizes.map { size in
                    try c.send(RawConnection.request("GET", "/big?size=\(size)"))
                    return try c.readResponse()
                }
            }
            for (size, answer) in zip(sizes, answers) {
                #expect(answer.status == 200)
                #expect(answer.body == (0..<size).map { UInt8($0 % 251) }, "\(size) bytes")
            }
        }
    }

    /// The kept buffer grows by doubling but never past its limit, and a larger request leaves it
    /// as it was.
    @Test func theKeptBufferNeverGrowsPastItsLimit() {
        let scratch = WriteScratch(capacity: 4 << 10)
        for count in [5_000, 60_000, WriteScratch.keptLimit, WriteScratch.keptLimit * 8, 100] {
            let last = scratch.withBytes(count) { bytes in
                bytes[count - 1] = 7  // every byte asked for is writable
                return bytes[count - 1]
            }
            #expect(last == 7)
            #expect(scratch.keptBytes >= min(count, WriteScratch.keptLimit))
            #expect(scratch.keptBytes <= WriteScratch.keptLimit)
        }
    }
}
