import Testing
import WaybillTesting

@testable import WaybillNetwork

@Suite(.timeLimit(.minutes(1)))
struct SlowHandlerTests {
    /// lws's own request timeout must not cut off a responder that takes longer than it.
    @Test func handlerSlowerThanTheLwsTimeoutStillAnswers() async throws {
        try await withServer({ $0.lwsTimeout = .seconds(1) }) { server in
            let port = server.port
            let (first, second) = try await runBlocking {
                // A generous client timeout: with the 5 s default this failed twice (`.timeout`, not
                // a closed connection) in the full parallel suite on a loaded machine, never alone;
                // the likeliest cause is the handler's `Task.sleep` resuming late while the other
                // tests keep the cooperative pool busy. lws cutting the request off shows as a close.
                let c = try RawConnection(port: port, timeout: .seconds(20))
                try c.send(RawConnection.request("GET", "/slow?ms=2200"))
                let first = try c.readResponse()
                try c.send(RawConnection.request("POST", "/slow?ms=1500", body: Array("x".utf8)))
                return (first, try c.readResponse())
            }
            #expect(first.status == 200)
            #expect(second.status == 200)
        }
    }
}
