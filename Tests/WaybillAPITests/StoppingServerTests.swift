import Foundation
import Testing
import WaybillAPI
import WaybillNetwork
import WaybillTesting

/// A server that is stopping, seen through a connection it kept from before (a load balancer's
/// pooled connection, during `idleConnectionDrain`).
@Suite(.serialized, .timeLimit(.minutes(2)))
struct StoppingServerTests {
    /// `/readyz` says no while the server stops, though the store answers: a health checker that
    /// reuses its connection must not take a stopping node for a ready one. `/healthz` (alive)
    /// still answers 200, as every other request on such a connection is answered.
    @Test func readinessIsRefusedOnAConnectionKeptWhileTheServerStops() async throws {
        try await TestServer.withRunning(configure: {
            $0.idleConnectionDrain = .seconds(30)
            $0.keepAliveTimeout = .seconds(60)  // the kept connections wait idle while the test looks
        }) { server in
            let port = server.port
            func keptConnection() async throws -> RawConnection {
                try await runBlocking {
                    let c = try RawConnection(port: port)
                    try c.send(RawConnection.request("GET", "/readyz"))
                    let answer = try c.readResponse()
                    #expect(answer.status == 200, "ready before the stop")
                    return c
                }
            }
            let (forReady, forAlive) = (try await keptConnection(), try await keptConnection())
            let stopping = Task { await server.stopServer() }
            // The listener closes first: once a connect is refused, the stop has begun.
            let begun = await eventually(timeout: .seconds(15)) { await connectIsRefused(port: port) }
            #expect(begun)
            let (ready, alive) = try await runBlocking { () -> (RawHTTPResponse, RawHTTPResponse) in
                try forReady.send(RawConnection.request("GET", "/readyz"))
                try forAlive.send(RawConnection.request("GET", "/healthz"))
                return (try forReady.readResponse(), try forAlive.readResponse())
            }
            #expect(ready.status == 503)
            #expect(ready.text.contains("shutting_down"))
            #expect(alive.status == 200)
            await stopping.value
        }
    }
}
