import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage
import WaybillTesting

@testable import WaybillRealtime

/// A store outage brings the same trouble to every socket at once: one warning a second tells it,
/// with how many were left out, and every socket is still refused (`Hub.troubleLines`).
@Suite(.timeLimit(.minutes(1)))
struct HubTroubleLinesTests {
    /// An authenticator whose store is down.
    final class FailingAuthenticator: SocketAuthenticating {
        struct Down: Error {}
        func redeemTicket(_ ticket: String) async throws -> SocketCredential? { throw Down() }
        func credential(forToken token: String) async throws -> SocketCredential? { throw Down() }
    }

    @Test func socketsWhoseAuthenticationFailsShareOneWarningASecond() async throws {
        try await withStore { store in
            let lines = Mutex<[String]>([])
            let service = ServiceThread()
            let hub = Hub(
                authenticator: FailingAuthenticator(), store: store, metrics: Metrics(),
                logger: Logger(minimum: .warning, sink: { line in lines.withLock { $0.append(line) } }), startingAfter: .origin)
            hub.execute = { body in service.queue.async { body(service.io) } }
            let sockets = (1...20).map { SocketID(UInt64($0)) }
            for socket in sockets { service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) } }
            #expect(await eventually { sockets.allSatisfy { service.io.closeCode($0) == 1011 } }, "every socket refused: try again")
            let warnings = lines.withLock { $0.filter { $0.contains("socket authentication failed") } }
            // All 20 within a second here; a loaded machine may straddle one second's end.
            #expect((1...2).contains(warnings.count), "\(warnings)")
            #expect(warnings.first?.contains("similar_not_logged=0") == true)
        }
    }
}
