import Dispatch
import Foundation
import Synchronization
import Testing
import WaybillAPI
import WaybillBroker
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// The hub's bounds on unauthenticated sockets, replays and garbage tickets, against the real
/// server (docs/HARDENING.md, item 3). A second store on the same file holds SQLite's write lock
/// (or the server's readers) to make the server's own store calls wait, as a stalled store would.
@Suite(.timeLimit(.minutes(1)))
struct SocketBoundsTests {
    static let unknownTicket = String(repeating: "A", count: 43)  // well-formed: it reaches the store

    /// Runs `body` while `hold` keeps a store thread busy (released afterwards, whatever happens).
    static func whileHeld(
        _ hold: @escaping @Sendable (@escaping @Sendable () -> Void) async throws -> Void, _ body: () async throws -> Void
    ) async throws {
        let release = DispatchSemaphore(value: 0), began = Atomic<Int>(0)
        let holding = Task {
            try await hold {
                began.add(1, ordering: .relaxed)
                _ = release.wait(timeout: .now() + 20)
            }
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while began.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        var failure: (any Error)?
        if began.load(ordering: .relaxed) == 0 { failure = HoldNeverBegan() }  // the body would test nothing
        do { try await body() } catch { failure = error }
        // Every holder (the readers are several) is let go, then waited for; spare signals are harmless.
        for _ in 0..<16 { release.signal() }
        try? await holding.value
        if let failure { throw failure }
    }

    struct HoldNeverBegan: Error {}

    static func closeLogged(_ server: TestServer, code: Int) -> Bool {
        server.logs.all.contains { $0.contains("msg=\"socket closed\"") && $0.contains("code=\(code)") }
    }

    /// A ticket (or a `?token=`) that cannot be one is refused without touching the store: with the
    /// store closed it is still a plain 4001, while a well-formed unknown one needs the store (1011).
    @Test func aMalformedTicketNeverReachesTheStore() async throws {
        try await TestServer.withRunning { server in
            server.store.close()
            let garbage = try await TestSocket.open(port: server.port, query: "ticket=' OR 1=1 --")
            #expect(await garbage.closed() == 4001)
            let tooLong = try await TestSocket.open(port: server.port, query: "ticket=" + String(repeating: "A", count: 44))
            #expect(await tooLong.closed() == 4001)
            let wellFormed = try await TestSocket.open(port: server.port, query: "ticket=\(Self.unknownTicket)")
            #expect(await wellFormed.closed() == 1011)
            // A token that cannot be one is refused the same way, without a store read (`malformed_token`).
            let garbageToken = try await TestSocket.open(port: server.port, query: "token=undefined")
            #expect(await garbageToken.closed() == 4001)
            let unknownToken = try await TestSocket.open(port: server.port, query: "token=\(Self.unknownTicket)")
            #expect(await unknownToken.closed() == 1011)
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"malformed_ticket\"} 2\n"))
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"malformed_token\"} 1\n"))
        }
    }

    /// One user may hold `maxSocketsPerUser` sockets on a node; one more is closed with 1013 (before
    /// it is ever `connected`), another user is not affected, and a closed socket frees its place.
    /// Once one token could open sockets until the process ran out of file descriptors.
    @Test func aUserPastTheirSocketLimitIsClosedWith1013() async throws {
        try await TestServer.withRunning(configure: { $0.maxSocketsPerUser = 3 }) { server in
            let seed = try await server.seed(drivers: 2, orders: 0)
            let driver = seed.drivers[0].token
            var open: [TestSocket] = []
            for _ in 0..<3 { open.append(try await server.connectedSocket(token: driver).0) }
            let extra = try await server.socket(token: driver)
            #expect(await extra.closed() != nil)  // an lws client reads 1013 as 1002: the server's log says
            #expect(await server.eventually { Self.closeLogged(server, code: 1013) })
            let (other, _) = try await server.connectedSocket(token: seed.drivers[1].token)
            await open[0].close()
            #expect(await server.eventually {
                (try? await server.request("GET", "/metrics").text.contains("waybill_websockets_open{group=\"driver\"} 3\n")) == true
            })
            let (again, _) = try await server.connectedSocket(token: driver)
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"sockets_per_user\"} 1\n"))
            for socket in open.dropFirst() + [other, again] { await socket.close() }
        }
    }

    /// A user's sockets share one frame budget (`Hub.Limits.maxFramesPerUserPerSecond`): 200 a
    /// second and 400 at once, or one a second (two at once) per socket the user may open when that
    /// is more. Eight sockets of one driver sending 200 pings each (each within its own budget) go
    /// past the default, and a socket is closed with 1008; with 1 000 sockets allowed (the
    /// benchmarks lift the cap so), every ping is answered.
    @Test(arguments: [32, 1000]) func aUsersSocketsShareOneFrameBudgetThatGrowsWithTheirSocketLimit(_ limit: Int) async throws {
        try await TestServer.withRunning(configure: { $0.maxSocketsPerUser = limit }) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            var sockets: [TestSocket] = []
            // 8 sockets of 200 each: 1 600 frames would need 6 s to stay under the user's 400 + 200/s.
            for _ in 0..<8 { sockets.append(try await server.connectedSocket(token: seed.drivers[0].token).0) }
            for socket in sockets { for _ in 0..<200 { await socket.send(#"{"type":"ping"}"#) } }
            if limit == 32 {
                #expect(await server.eventually { Self.closeLogged(server, code: 1008) })
                #expect(server.logs.all.contains { $0.contains("user's sockets sent too many frames") })
            } else {
                for socket in sockets {
                    var pongs = 0
                    while pongs < 200, let frame = await socket.next(timeout: .seconds(20)) {
                        if frame["type"] as? String == "pong" { pongs += 1 }
                    }
                    #expect(pongs == 200)
                }
                #expect(!Self.closeLogged(server, code: 1008))
            }
            for socket in sockets { await socket.close() }
        }
    }

    /// A socket whose authentication does not finish in time is closed with 1013 (not kept, with
    /// its task, until the store answers).
    @Test func anAuthenticationThatTakesTooLongIsClosedWith1013() async throws {
        try await TestServer.withRunning(configure: { $0.socketAuthenticationTimeout = .milliseconds(300) }) { server in
            let blocker = try SQLiteOrderStore(path: server.directory.appendingPathComponent("waybill.sqlite").path)
            defer { blocker.close() }
            try await Self.whileHeld({ wait in try await blocker.write { _ in wait() } }) {
                let socket = try await TestSocket.open(port: server.port, query: "ticket=\(Self.unknownTicket)")
                #expect(await socket.closed() != nil)  // an lws client reads 1013 as 1002
                // 1013 (logged) is the authentication timeout's code: the store's own 5 s wait
                // would end in another one. No stopwatch: a stalled runner took seconds here.
                #expect(await server.eventually { Self.closeLogged(server, code: 1013) })
            }
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"socket_authentication_time\"} 1\n"))
        }
    }

    /// Past `maxConcurrentSocketAuthentications`, a new socket is closed with 1013 at once; once
    /// the running ones finish, sockets are served again.
    @Test func authenticationsPastTheBoundAreClosedWith1013() async throws {
        // The held sockets wait on the store's lock while the test looks: neither the store's busy
        // timeout nor the authentication timeout may end that wait on a stalled runner.
        try await TestServer.withRunning(
            configure: {
                $0.maxConcurrentSocketAuthentications = 2
                $0.socketAuthenticationTimeout = .seconds(60)
            },
            openStore: { try SQLiteOrderStore(path: $0, busyTimeout: .seconds(60)) }
        ) { server in
            let seed = try await server.seed(drivers: 1, orders: 0)
            let blocker = try SQLiteOrderStore(path: server.directory.appendingPathComponent("waybill.sqlite").path)
            defer { blocker.close() }
            var waiting: [TestSocket] = []
            try await Self.whileHeld({ wait in try await blocker.write { _ in wait() } }) {
                for _ in 0..<2 { waiting.append(try await TestSocket.open(port: server.port, query: "ticket=\(Self.unknownTicket)")) }
                let refused = try await TestSocket.open(port: server.port, query: "ticket=\(Self.unknownTicket)")
                #expect(await refused.closed() != nil)
                // Logged in the server's close callback, which may run just after the client saw the close.
                #expect(await server.eventually { Self.closeLogged(server, code: 1013) })
                #expect(await !waiting[0].isClosed)
                #expect(await !waiting[1].isClosed)
            }
            for socket in waiting { #expect(await socket.closed(timeout: .seconds(10)) == 4001) }
            let (socket, connected) = try await server.connectedSocket(token: seed.drivers[0].token)
            #expect(connected["type"] as? String == "connected")
            await socket.close()
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"socket_authentications\"} 1\n"))
        }
    }

    /// Replays past `maxConcurrentReplays` are closed with 1013; live events that pile up while a
    /// replay waits are bounded by `maxReplayEvents`, past which the socket gets 4008.
    @Test func replaysAndTheirBuffersAreBounded() async throws {
        try await TestServer.withRunning(configure: {
            $0.maxConcurrentReplays = 1
            $0.maxReplayEvents = 3
        }) { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            // Tickets first: once the readers are held, a token lookup (a read) would wait too.
            var tickets: [String] = []
            for _ in 0..<2 {
                let answer = try await server.request("POST", "/api/ws-ticket", token: seed.dispatcherToken)
                tickets.append(try #require(answer.object.string("ticket")))
            }
            let store = server.store
            let company = CompanyID(seed.companyID)
            // Every reader thread (4) busy: the first replay query waits for one.
            try await Self.whileHeld({ wait in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<4 { group.addTask { try await store.read { _ in wait() } } }
                    try await group.waitForAll()
                }
            }) {
                let replaying = try await TestSocket.open(port: server.port, query: "ticket=\(tickets[0])&since=0")
                #expect(await replaying.next()?["type"] as? String == "connected")
                let second = try await TestSocket.open(port: server.port, query: "ticket=\(tickets[1])&since=0")
                #expect(await second.next()?["type"] as? String == "connected")
                #expect(await second.closed() != nil)
                #expect(await server.eventually { Self.closeLogged(server, code: 1013) })
                // Four live events for the company while the first replay waits (written to the
                // store, and handed to the broker here as the relay would publish them).
                let events = try await store.write { tx in
                    try tx.appendEvents((0..<4).map { _ in
                        OrderEvent(
                            type: .updated, companyID: company, orderID: OrderID(seed.drivers[0].orderIDs?.first ?? 1),
                            number: "n", oldStatus: nil, newStatus: .new, driverID: nil, changedAt: Date(),
                            groups: [.company(company)])
                    })
                }
                try await server.broker.publish(events)
                #expect(await replaying.closed() == 4008)
            }
            let metrics = try await server.request("GET", "/metrics").text
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"replay_queries\"} 1\n"))
            #expect(metrics.contains("waybill_bound_overflows_total{bound=\"replay_buffer\"} 1\n"))
        }
    }
}
