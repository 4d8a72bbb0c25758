import Foundation
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillRealtime
import WaybillStorage
import WaybillTesting

/// A socket may send `burst` frames at once and `perSecond` on average; past that it is closed
/// with 1008 (a ping flood took the service thread's time from every other socket).
@Suite(.timeLimit(.minutes(1)))
struct FrameBudgetTests {
    @Test func aBurstThenTheRefillRate() {
        var budget = FrameBudget(perSecond: 2, burst: 3)
        var taken: [Bool] = []
        for at: Duration in [.zero, .zero, .zero, .zero, .milliseconds(400), .milliseconds(500)] {
            taken.append(budget.take(at: at))
        }
        // Three at once, then none, 0.8 of a frame back at 400 ms, one at 500 ms.
        #expect(taken == [true, true, true, false, false, true])
        var later: [Bool] = []
        for at: Duration in [.seconds(10), .seconds(10), .seconds(10), .seconds(10), .seconds(9)] {
            later.append(budget.take(at: at))
        }
        // Refilled after a long gap, but never past the burst; a clock read that went back refills nothing.
        #expect(later == [true, true, true, false, false])
    }

    /// A hub on its service thread whose sockets may send 10 frames at once and one a second after.
    static func hub(on store: any OrderStore) -> (Hub, ServiceThread, GatedAuthenticator) {
        let service = ServiceThread()
        let auth = GatedAuthenticator()
        var limits = Hub.Limits()
        limits.maxFramesPerSecond = 1
        limits.frameBurst = 10
        let hub = Hub(
            authenticator: auth, store: store, metrics: Metrics(), logger: Fixtures.logger, startingAfter: .origin,
            configuration: .init(limits: limits))
        hub.execute = { body in service.queue.async { body(service.io) } }
        return (hub, service, auth)
    }

    @Test func aSocketThatFloodsPingsIsClosedWith1008AndOthersAreNot() async throws {
        try await withStore { store in
            let (hub, service, auth) = Self.hub(on: store)
            for socket in [SocketID(1), SocketID(2)] {
                service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) }
                let answer = await auth.nextQuestion()
                answer(HubLogoutTests.driver, SessionEpoch(0))
                #expect(await eventually { service.io.frames(socket) == 1 })  // connected
            }
            service.run { io in
                for _ in 0..<50 { hub.socketReceived(SocketID(1), text: #"{"type":"ping"}"#, io: io) }
                hub.socketReceived(SocketID(2), text: #"{"type":"ping"}"#, io: io)
            }
            #expect(service.io.closeCode(SocketID(1)) == 1008)
            #expect(service.io.frames(SocketID(1)) <= 1 + 11, "connected, then at most the burst of pongs")
            #expect(service.io.closeCode(SocketID(2)) == nil)
            #expect(service.io.frames(SocketID(2)) == 2, "connected and its pong")
        }
    }

    /// Frames sent while the socket's authentication runs are ignored, but they count: a flood
    /// before the answer is closed with 1008 like one after it.
    @Test func framesBeforeTheAuthenticationAnswersCountToo() async throws {
        try await withStore { store in
            let (hub, service, auth) = Self.hub(on: store)
            service.run { io in hub.socketOpened(SocketID(1), request: HubLogoutTests.request, io: io) }
            let answer = await auth.nextQuestion()  // held: the authentication has not answered
            service.run { io in
                for _ in 0..<50 { hub.socketReceived(SocketID(1), text: #"{"type":"ping"}"#, io: io) }
            }
            #expect(service.io.closeCode(SocketID(1)) == 1008)
            #expect(service.io.frames(SocketID(1)) == 0, "nothing answered before the authentication")
            answer(HubLogoutTests.driver, SessionEpoch(0))
        }
    }
}
