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
    /// Short waits between a sweep's tries, so a test of the last one is quick.
    static let quickRetries: [Duration] = [.milliseconds(10), .milliseconds(10)]

    /// Alice logged out once while the node could not read logouts (her epoch is 1); Bob never did.
    /// Her socket of a token from before that logout closes with 4001, her socket of a login since
    /// and Bob's stay; a user the store no longer has loses their socket.
    @Test func onlyTheSocketsOfCredentialsRevokedMeanwhileClose() async throws {
        try await withStore { store in
            let (alice, bob) = try await Self.seedUsers(store)
            try await store.write { tx in _ = try tx.revokeTokens(of: alice.id) }
            let gone = User(id: UserID(999), companyID: alice.companyID, role: .driver, email: "g@example.com", name: "G")
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            try await Self.admit([
                (SocketID(1), alice, SessionEpoch(0)), (SocketID(2), alice, SessionEpoch(1)),
                (SocketID(3), bob, SessionEpoch(0)), (SocketID(4), gone, SessionEpoch(0)),
            ], to: hub, on: service, auth: auth)
            let heard = Mutex<[UserID]>([])
            hub.sweepSessions(at: Self.at) { user in heard.withLock { $0.append(user) } }
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil && service.io.closeCode(SocketID(4)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            #expect(service.io.closeCode(SocketID(4)) == 4001)
            // The sweep closes in one body on the service thread: the two others stay.
            service.run { _ in }
            #expect(service.io.closeCode(SocketID(2)) == nil)
            #expect(service.io.closeCode(SocketID(3)) == nil)
            #expect(Set(heard.withLock { $0 }) == [alice.id, gone.id], "only the users who lost a socket")
        }
    }

    /// A read that fails is tried again (a store just back may fail one); only when every try
    /// failed does the node close every socket with 1012, since it cannot tell whose to keep.
    @Test func aSweepTriesItsReadAgainAndClosesEverySocketWith1012OnlyWhenAllFail() async throws {
        try await withStore { real in
            let (alice, bob) = try await Self.seedUsers(real)
            try await real.write { tx in _ = try tx.revokeTokens(of: alice.id) }
            let store = CountingStore(real)
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            try await Self.admit([(SocketID(1), alice, SessionEpoch(0)), (SocketID(2), bob, SessionEpoch(0))], to: hub, on: service, auth: auth)

            store.failUrgentReads(2)  // the first try and the first retry
            hub.sweepSessions(at: Self.at, retries: Self.quickRetries) { _ in }
            #expect(await eventually { service.io.closeCode(SocketID(1)) != nil })
            #expect(service.io.closeCode(SocketID(1)) == 4001)
            service.run { _ in }
            #expect(service.io.closeCode(SocketID(2)) == nil)
            #expect(store.urgentReads == 3)

            store.failUrgentReads(3)  // every try
            hub.sweepSessions(at: Self.at, retries: Self.quickRetries) { _ in }
            #expect(await eventually { service.io.closeCode(SocketID(2)) != nil })
            #expect(service.io.closeCode(SocketID(2)) == 1012)
            #expect(store.urgentReads == 6)
        }
    }

    /// A node with no admitted socket reads nothing; once one is admitted, a sweep reads once.
    @Test func aSweepReadsOnlyWhenASocketIsAdmitted() async throws {
        try await withStore { real in
            let (alice, _) = try await Self.seedUsers(real)
            let store = CountingStore(real)
            let service = ServiceThread()
            let auth = GatedAuthenticator()
            let hub = service.hub(authenticator: auth, store: store)
            service.run { io in hub.socketOpened(SocketID(1), request: HubLogoutTests.request, io: io) }  // still authenticating
            hub.sweepSessions(at: Self.at) { _ in }
            service.run { _ in }
            try await Task.sleep(for: .milliseconds(100))
            #expect(store.urgentReads == 0)
            let answer = await auth.nextQuestion()
            answer(alice, SessionEpoch(0))
            #expect(await eventually { service.io.frames(SocketID(1)) == 1 })
            hub.sweepSessions(at: Self.at) { _ in }
            #expect(await eventually { store.finishedReads == 1 })
            service.run { _ in }
            #expect(store.urgentReads == 1)
            #expect(service.io.closeCode(SocketID(1)) == nil)
        }
    }

    /// Opens each socket and admits it with its user and credential epoch.
    static func admit(
        _ sockets: [(SocketID, User, SessionEpoch)], to hub: Hub, on service: ServiceThread, auth: GatedAuthenticator
    ) async throws {
        for (socket, user, epoch) in sockets {
            service.run { io in hub.socketOpened(socket, request: HubLogoutTests.request, io: io) }
            let answer = await auth.nextQuestion()
            answer(user, epoch)
            #expect(await eventually { service.io.frames(socket) == 1 })
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
