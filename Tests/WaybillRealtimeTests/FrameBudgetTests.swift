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

    /// A hub on its service thread whose sockets may send 10 frames at once and one a second after
    /// (and a user's sockets together `userBurst` at once, one a second after).
    static func hub(on store: any OrderStore, userBurst: Int = 400) -> (Hub, ServiceThread, GatedAuthenticator) {
        let service = ServiceThread()
        let auth = GatedAuthenticator()
        var limits = Hub.Limits()
        limits.maxFramesPerSecond = 1
        limits.frameBurst = 10
        limits.maxFramesPerUserPerSecond = 1
        limits.userFrameBurst = userBurst
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

    /// A user's sockets share one budget too: 32 sockets of one token, each within its own, sent 32
    /// times one socket's frames (found by a review). The socket whose frame goes past it is closed
    /// with 1008; another user's socket is not, and a socket of the user that stayed within the
    /// budget is not.
    @Test func aUsersSocketsTogetherArePastTheirBudgetAndTheSocketThatWentOverIsClosed() async throws {
        try await withStore { store in
            let (hub, service, auth) = Self.hub(on: store, userBurst: 15)
            for (socket, user) in [(SocketID(1), HubLogoutTests.driver), (SocketID(2), HubLogoutTests.driver), (SocketID(3), HubLogoutTests.other)] {
                service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) }
                let answer = await auth.nextQuestion()
                answer(user, SessionEpoch(0))
                #expect(await eventually { service.io.frames(socket) == 1 })  // connected
            }
            service.run { io in
                for _ in 0..<8 { hub.socketReceived(SocketID(1), text: #"{"type":"ping"}"#, io: io) }
                for _ in 0..<8 { hub.socketReceived(SocketID(2), text: #"{"type":"ping"}"#, io: io) }
                for _ in 0..<8 { hub.socketReceived(SocketID(3), text: #"{"type":"ping"}"#, io: io) }
            }
            #expect(service.io.closeCode(SocketID(1)) == nil, "8 frames: within both budgets")
            #expect(service.io.frames(SocketID(1)) == 9, "connected and 8 pongs")
            #expect(service.io.closeCode(SocketID(2)) == 1008, "the 16th frame of the user")
            #expect(service.io.frames(SocketID(2)) == 1 + 7, "connected, then the pongs within the user's 15")
            #expect(service.io.closeCode(SocketID(3)) == nil, "another user's budget")
            #expect(service.io.frames(SocketID(3)) == 9)
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
