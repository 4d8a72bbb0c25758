import Dispatch
import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillRealtime
import WaybillStorage

/// A logout that the hub acts on while a socket of the same user is still authenticating
/// (`?token=` read before the logout committed): the socket must not be admitted afterwards,
/// since nothing else would close it.
@Suite(.timeLimit(.minutes(1)))
struct HubLogoutTests {
    static let driver = User(id: 7, companyID: 1, role: .driver, email: "d@example.com", name: "D")
    static let other = User(id: 8, companyID: 1, role: .driver, email: "e@example.com", name: "E")

    @Test func aSocketAuthenticatedBeforeALogoutIsRefusedWhenAdmittedAfterIt() async throws {
        try await withStore { store in
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: Self.request, io: io) }
            let answer = await auth.nextQuestion()  // the token is being looked up (found valid)
            service.run { io in hub.closeSockets(of: Self.driver.id, io: io) }  // the watcher acts now
            answer(Self.driver)
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            #expect(service.io.frames(SocketID(1)) == 0)  // no `connected`: never admitted
        }
    }

    /// The same race for another user, or a socket opened after the logout, is admitted.
    @Test func onlySocketsOfTheLoggedOutUserOpenedBeforeTheLogoutAreRefused() async throws {
        try await withStore { store in
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: Self.request, io: io) }
            let first = await auth.nextQuestion()
            service.run { io in hub.closeSockets(of: Self.other.id, io: io) }  // someone else logs out
            first(Self.driver)
            service.run { io in hub.socketOpened(SocketID(2), request: Self.request, io: io) }
            let second = await auth.nextQuestion()
            second(Self.driver)
            #expect(await eventually { service.io.frames(SocketID(1)) == 1 && service.io.frames(SocketID(2)) == 1 })
            #expect(service.io.closeCode(SocketID(1)) == nil)

            // A socket opened after the driver's own logout was authenticated after it too.
            service.run { io in hub.closeSockets(of: Self.driver.id, io: io) }
            #expect(service.io.closeCode(SocketID(1)) == 4001)  // the admitted ones close as before
            service.run { io in hub.socketOpened(SocketID(3), request: Self.request, io: io) }
            let third = await auth.nextQuestion()
            third(Self.driver)
            #expect(await eventually { service.io.frames(SocketID(3)) == 1 })
            #expect(service.io.closeCode(SocketID(3)) == nil)
        }
    }

    /// The ledger forgets logouts once no authenticating socket opened before them.
    @Test func theLedgerStaysSmall() {
        var ledger = LogoutLedger()
        for user in 1...10_000 { ledger.record(UserID(Int64(user))) { nil } }
        #expect(ledger.entries < 128)
        #expect(ledger.loggedOut(UserID(10_000), since: 9_999))
        #expect(!ledger.loggedOut(UserID(10_000), since: 10_000))
        // A socket pending since logout 5 keeps every later logout.
        var pinned = LogoutLedger()
        for user in 1...1_000 { pinned.record(UserID(Int64(user))) { 5 } }
        #expect(pinned.loggedOut(UserID(6), since: 5))
        #expect(pinned.entries == 995)
    }

    static let request = HTTPRequest(method: "GET", path: "/ws", query: [(name: "token", value: "t")])
}

/// Answers each `user(forToken:)` only when the test says so.
final class GatedAuthenticator: SocketAuthenticating {
    private let pending = Mutex<[CheckedContinuation<User?, Never>]>([])

    func redeemTicket(_ ticket: String) async throws -> User? { nil }
    func user(forToken token: String) async throws -> User? {
        await withCheckedContinuation { continuation in pending.withLock { $0.append(continuation) } }
    }

    /// Waits for the next lookup; returns the function that answers it.
    func nextQuestion() async -> @Sendable (User?) -> Void {
        while true {
            if let continuation = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                return { continuation.resume(returning: $0) }
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }
}

/// A serial queue standing in for the service thread, with a `SocketIO` that records.
final class ServiceThread: Sendable {
    let queue = DispatchQueue(label: "service")
    let io = RecordingIO()

    func hub(authenticator: any SocketAuthenticating, store: any OrderStore) -> Hub {
        let hub = Hub(
            authenticator: authenticator, store: store, metrics: Metrics(), logger: Fixtures.logger, startingAfter: .origin)
        let queue = self.queue, io = self.io
        hub.execute = { body in queue.async { body(io) } }
        return hub
    }

    /// Runs `body` on the queue and waits for it.
    func run(_ body: (any SocketIO) -> Void) { queue.sync { body(io) } }
}

final class RecordingIO: SocketIO, Sendable {
    private let state = Mutex<(frames: [SocketID: Int], closed: [SocketID: Int])>(([:], [:]))

    func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool {
        state.withLock { $0.frames[socket, default: 0] += 1 }
        return true
    }
    func close(_ socket: SocketID, code: Int, reason: String) { state.withLock { $0.closed[socket] = code } }
    func isOpen(_ socket: SocketID) -> Bool { state.withLock { $0.closed[socket] == nil } }
    func queuedBytes(_ socket: SocketID) -> Int { 0 }

    /// Frames sent to `socket` (an admitted socket without a resume gets one: `connected`).
    func frames(_ socket: SocketID) -> Int { state.withLock { $0.frames[socket] ?? 0 } }
    func closeCode(_ socket: SocketID) -> Int? { state.withLock { $0.closed[socket] } }
}
