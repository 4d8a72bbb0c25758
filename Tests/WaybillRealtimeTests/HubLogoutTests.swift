import Dispatch
import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillRealtime
import WaybillStorage
import WaybillTesting

/// A logout that the hub acts on while a socket of the same user is still authenticating
/// (`?token=` read before the logout committed): the socket must not be admitted afterwards,
/// since nothing else would close it.
@Suite(.timeLimit(.minutes(1)))
struct HubLogoutTests {
    static let driver = User(id: 7, companyID: 1, role: .driver, email: "d@example.com", name: "D")
    static let other = User(id: 8, companyID: 1, role: .driver, email: "e@example.com", name: "E")

    /// The driver's logout that started epoch 1: it revoked the tokens of epoch 0.
    static let logout = Logout(userID: driver.id, at: Date(timeIntervalSince1970: 1_800_000_000), epoch: SessionEpoch(1))
    static let before = SessionEpoch(0), after = SessionEpoch(1)

    @Test func aSocketAuthenticatedBeforeALogoutIsRefusedWhenAdmittedAfterIt() async throws {
        try await withStore { store in
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: Self.request, io: io) }
            let answer = await auth.nextQuestion()  // the token is being looked up (found valid)
            service.run { io in hub.closeSockets(revokedBy: Self.logout, io: io) }  // the watcher acts now
            answer(Self.driver, Self.before)
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            #expect(service.io.frames(SocketID(1)) == 0)  // no `connected`: never admitted
        }
    }

    /// The same race for another user, a socket opened after the logout, or a token of a login
    /// made after it, is admitted.
    @Test func onlySocketsOfTheLoggedOutUserOpenedBeforeTheLogoutAreRefused() async throws {
        try await withStore { store in
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: Self.request, io: io) }
            let first = await auth.nextQuestion()
            let someoneElse = Logout(userID: Self.other.id, at: Self.logout.at, epoch: SessionEpoch(1))
            service.run { io in hub.closeSockets(revokedBy: someoneElse, io: io) }
            first(Self.driver, Self.before)
            service.run { io in hub.socketOpened(SocketID(2), request: Self.request, io: io) }
            let second = await auth.nextQuestion()
            second(Self.driver, Self.before)
            #expect(await eventually { service.io.frames(SocketID(1)) == 1 && service.io.frames(SocketID(2)) == 1 })
            #expect(service.io.closeCode(SocketID(1)) == nil)

            // Pending while the driver's own logout is acted on, but with a token made after it.
            service.run { io in hub.socketOpened(SocketID(4), request: Self.request, io: io) }
            let fourth = await auth.nextQuestion()
            service.run { io in hub.closeSockets(revokedBy: Self.logout, io: io) }
            #expect(service.io.closeCode(SocketID(1)) == 4001)  // the admitted ones close as before
            fourth(Self.driver, Self.after)
            #expect(await eventually { service.io.frames(SocketID(4)) == 1 })
            #expect(service.io.closeCode(SocketID(4)) == nil)

            // A socket opened after the driver's logout was authenticated after it too.
            service.run { io in hub.socketOpened(SocketID(3), request: Self.request, io: io) }
            let third = await auth.nextQuestion()
            third(Self.driver, Self.before)
            #expect(await eventually { service.io.frames(SocketID(3)) == 1 })
            #expect(service.io.closeCode(SocketID(3)) == nil)
        }
    }

    /// A node may hear of a logout after a login made since opened a socket on it (the session
    /// watcher polls): that socket stays; the sockets of the revoked tokens close.
    @Test func aLogoutClosesOnlyTheSocketsOfTheTokensItRevoked() async throws {
        try await withStore { store in
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            for (socket, epoch) in [(SocketID(1), Self.before), (SocketID(2), Self.after)] {
                service.run { io in hub.socketOpened(socket, request: Self.request, io: io) }
                let answer = await auth.nextQuestion()
                answer(Self.driver, epoch)
                #expect(await eventually { service.io.frames(socket) == 1 })
            }
            service.run { io in hub.closeSockets(revokedBy: Self.logout, io: io) }
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            #expect(service.io.closeCode(SocketID(2)) == nil)
            // The next logout revokes the newer token too.
            let next = Logout(userID: Self.driver.id, at: Self.logout.at + 1, epoch: SessionEpoch(2))
            service.run { io in hub.closeSockets(revokedBy: next, io: io) }
            #expect(service.io.closeCode(SocketID(2)) == 4001)
        }
    }

    /// The ledger forgets logouts once no authenticating socket opened before them.
    @Test func theLedgerStaysSmall() {
        func logout(_ user: Int) -> Logout { Logout(userID: UserID(Int64(user)), at: Self.logout.at, epoch: SessionEpoch(1)) }
        var ledger = LogoutLedger()
        for user in 1...10_000 { ledger.record(logout(user)) { nil } }
        #expect(ledger.entries < 128)
        #expect(ledger.revoked(UserID(10_000), epoch: Self.before, since: 9_999))
        #expect(!ledger.revoked(UserID(10_000), epoch: Self.after, since: 9_999))
        #expect(!ledger.revoked(UserID(10_000), epoch: Self.before, since: 10_000))
        // A socket pending since logout 5 keeps every later logout.
        var pinned = LogoutLedger()
        for user in 1...1_000 { pinned.record(logout(user)) { 5 } }
        #expect(pinned.revoked(UserID(6), epoch: Self.before, since: 5))
        #expect(pinned.entries == 995)
    }

    /// Logouts may be acted on out of epoch order (one made here at once, an earlier one from
    /// another node at the next poll): the ledger keeps the highest epoch, which revoked the most.
    @Test func theLedgerKeepsTheHighestEpochOfAUsersLogouts() {
        var ledger = LogoutLedger()
        let user = Self.driver.id, at = Self.logout.at
        ledger.record(Logout(userID: user, at: at + 1, epoch: SessionEpoch(6))) { 0 }
        ledger.record(Logout(userID: user, at: at, epoch: SessionEpoch(5))) { 0 }
        #expect(ledger.revoked(user, epoch: SessionEpoch(5), since: 0))
        #expect(!ledger.revoked(user, epoch: SessionEpoch(6), since: 0))
    }

    static let request = HTTPRequest(method: "GET", path: "/ws", query: [(name: "token", value: "t")])
}

/// Answers each `credential(forToken:)` only when the test says so.
final class GatedAuthenticator: SocketAuthenticating {
    private let pending = Mutex<[CheckedContinuation<SocketCredential?, Never>]>([])

    func redeemTicket(_ ticket: String) async throws -> SocketCredential? { nil }
    func credential(forToken token: String) async throws -> SocketCredential? {
        await withCheckedContinuation { continuation in pending.withLock { $0.append(continuation) } }
    }

    /// Waits for the next lookup; returns the function that answers it with a user and the token's epoch.
    func nextQuestion() async -> @Sendable (User, SessionEpoch) -> Void {
        while true {
            if let continuation = pending.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                return { continuation.resume(returning: SocketCredential(user: $0, epoch: $1)) }
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
    private let state = Mutex<(sent: [SocketID: [OutboundFrame]], closed: [SocketID: Int])>(([:], [:]))

    func send(_ frame: OutboundFrame, to socket: SocketID) -> Bool {
        state.withLock { $0.sent[socket, default: []].append(frame) }
        return true
    }
    func close(_ socket: SocketID, code: Int, reason: String) { state.withLock { $0.closed[socket] = code } }
    func isOpen(_ socket: SocketID) -> Bool { state.withLock { $0.closed[socket] == nil } }
    func queuedBytes(_ socket: SocketID) -> Int { 0 }

    /// Frames sent to `socket` (an admitted socket without a resume gets one: `connected`).
    func frames(_ socket: SocketID) -> Int { state.withLock { $0.sent[socket]?.count ?? 0 } }
    /// The frames sent to `socket`, in order.
    func sent(_ socket: SocketID) -> [OutboundFrame] { state.withLock { $0.sent[socket] ?? [] } }
    func closeCode(_ socket: SocketID) -> Int? { state.withLock { $0.closed[socket] } }
}
