import Foundation
import Synchronization
import Testing
import WaybillDomain
import WaybillNetwork
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// A node whose session watcher lost track of logouts reads each connected user's session epoch
/// and closes only the sockets of credentials revoked meanwhile (`Hub.sweepSessions`).
@Suite(.timeLimit(.minutes(1)))
struct HubSessionSweepTests {
    static let at = Date(timeIntervalSince1970: 1_800_000_000)

    /// Alice logged out once while the node could not read logouts (her epoch is 1); Bob never did.
    /// Her socket of a token from before that logout closes with 4001, her socket of a login since
    /// and Bob's stay; so does nothing of a user the store no longer has but that user's socket.
    @Test func onlyTheSocketsOfCredentialsRevokedMeanwhileClose() async throws {
        try await withStore { store in
            let (alice, bob) = try await Self.seedUsers(store)
            try await store.write { tx in _ = try tx.revokeTokens(of: alice.id) }
            let gone = User(id: UserID(999), companyID: alice.companyID, role: .driver, email: "g@example.com", name: "G")
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            let sockets: [(SocketID, User, SessionEpoch)] = [
                (SocketID(1), alice, SessionEpoch(0)), (SocketID(2), alice, SessionEpoch(1)),
                (SocketID(3), bob, SessionEpoch(0)), (SocketID(4), gone, SessionEpoch(0)),
            ]
            for (socket, user, epoch) in sockets {
                service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) }
                let answer = await auth.nextQuestion()
                answer(user, epoch)
                #expect(await eventually { service.io.frames(socket) == 1 })
            }
            let heard = Mutex<[Logout]>([])
            hub.sweepSessions(at: Self.at) { logout in heard.withLock { $0.append(logout) } }
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil && service.io.closeCode(SocketID(4)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            #expect(service.io.closeCode(SocketID(4)) == 4001)
            // Everything the sweep does is done on the service thread by now: the two others stay.
            service.run { _ in }
            #expect(service.io.closeCode(SocketID(2)) == nil)
            #expect(service.io.closeCode(SocketID(3)) == nil)
            let logouts = heard.withLock { $0 }.sorted { $0.userID.rawValue < $1.userID.rawValue }
            #expect(logouts.map(\.userID) == [alice.id, gone.id])
            #expect(logouts.map(\.epoch) == [SessionEpoch(1), .revokesAll])
        }
    }

    /// When the epochs cannot be read, the node cannot tell whose sockets to keep: every socket
    /// closes with 1012, and each client signs in again.
    @Test func aSweepThatCannotReadClosesEverySocketWith1012() async throws {
        try await withStore { real in
            let (alice, bob) = try await Self.seedUsers(real)
            let store = CountingStore(real, failReads: true)
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            for (socket, user) in [(SocketID(1), alice), (SocketID(2), bob)] {
                service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) }
                let answer = await auth.nextQuestion()
                answer(user, SessionEpoch(0))
                #expect(await eventually { service.io.frames(socket) == 1 })
            }
            let heard = Atomic<Int>(0)
            hub.sweepSessions(at: Self.at) { _ in heard.add(1, ordering: .relaxed) }
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil && service.io.closeCode(SocketID(2)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 1012)
            #expect(service.io.closeCode(SocketID(2)) == 1012)
            #expect(store.urgentReads == 1)
            #expect(heard.load(ordering: .relaxed) == 0)
        }
    }

    /// A node with no admitted socket reads nothing.
    @Test func aSweepWithNoSocketsReadsNothing() async throws {
        try await withStore { real in
            let store = CountingStore(real)
            let service = ServiceThread()
            let hub = service.hub(authenticator: GatedAuthenticator(), store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: HubLogoutTests.request, io: io) }  // still authenticating
            hub.sweepSessions(at: Self.at) { _ in }
            service.run { _ in }
            try await Task.sleep(for: .milliseconds(100))
            #expect(store.urgentReads == 0)
            #expect(service.io.closeCode(SocketID(1)) == nil)
        }
    }

    static func seedUsers(_ store: some OrderStore) async throws -> (User, User) {
        try await store.write { tx in
            let company = try tx.insertCompany(name: "Acme")
            let alice = try tx.insertUser(companyID: company.id, role: .driver, email: "a@example.com", name: "A", passwordHash: "x")
            let bob = try tx.insertUser(companyID: company.id, role: .driver, email: "b@example.com", name: "B", passwordHash: "x")
            return (alice, bob)
        }
    }
}
