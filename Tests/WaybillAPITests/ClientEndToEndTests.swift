import Foundation
import Synchronization
import Testing
import WaybillAPI
import WaybillClient
import WaybillClientTransports
import WaybillNetwork

/// `WaybillClient` against the real server, over the real transports (sockets + libwebsockets).
@Suite(.timeLimit(.minutes(3)))
struct ClientEndToEndTests {
    static let loop = Result { try WebSocketClientLoop() }

    /// A logged-in session with quick reconnects (so a restart is caught up in seconds, not a poll).
    static func session(
        _ server: TestServer, email: String, password: String, storage: any ActionStorage = InMemoryActionStorage(),
        transport: (any EventTransport)? = nil
    ) async throws -> DriverSession {
        let (api, _) = try await HTTPOrdersAPI.logIn(
            server: URL(string: server.baseURL)!, email: email, password: password, transport: SocketHTTPTransport())
        let policy = ReconnectPolicy(base: .milliseconds(200), cap: .seconds(1))
        let session = DriverSession(
            api: api, transport: try transport ?? LwsEventTransport(loop: try loop.get()),
            configuration: .init(reconnectPolicy: policy, pollInterval: .seconds(120)), actionStorage: storage)
        await session.start()
        return session
    }

    /// Waits (polling every 20 ms, at most `timeout`) until `condition` holds for the session.
    static func until(
        _ session: DriverSession, timeout: Duration = .seconds(20), _ condition: @Sendable (DriverSession) async -> Bool
    ) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if await condition(session) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return await condition(session)
    }

    /// This transport has no TLS: a `wss://` URL is refused before anything is sent, rather than sent
    /// in the clear with its ticket.
    @Test func theLwsTransportRefusesWssInsteadOfSendingItInTheClear() async throws {
        let transport = LwsEventTransport(loop: try Self.loop.get())
        await #expect(throws: UnsupportedScheme.self) {
            _ = try await transport.connect(SocketRequest(url: URL(string: "wss://127.0.0.1:9/ws/orders/?ticket=t")!))
        }
    }

    @Test func aDispatchersWriteShowsUpWithinASecond() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let session = try await Self.session(server, email: driver.email, password: driver.password)
            #expect(await Self.until(session) { session in
                let live = await session.connectionState == .live
                let loaded = await session.orders.isEmpty == false
                return live && loaded
            })
            let opened = try await session.detail(OrderID(id))
            #expect(opened.title.hasPrefix("Delivery"))
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": "Moved pallets"])
            let started = ContinuousClock.now
            #expect(await Self.until(session) { await $0.orders.first?.title == "Moved pallets" })
            #expect(await Self.until(session) { await $0.cachedDetail(OrderID(id))?.title == "Moved pallets" })
            // Typically ~0.3 s (the 250 ms coalescing window, then two fetches). The bound tells a
            // pushed change from the 120 s safety poll; tighter (3 s), it could fail on a CI runner
            // stalled for seconds by the parallel suite.
            #expect(ContinuousClock.now - started < .seconds(15))
            await session.stop()
        }
    }

    /// The driver acts on the version they saw; the dispatcher changed the order first: 412, nothing applied.
    @Test func anActionOnAStaleVersionIsAConflictAndChangesNothing() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let session = try await Self.session(server, email: driver.email, password: driver.password)
            let seen = try await session.detail(OrderID(id))
            _ = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "Gate 9"])
            do {
                try await session.changeStatus(of: OrderID(id), to: .accepted, expecting: .version(seen.version))
                Issue.record("no error")
            } catch let error as WaybillClientError {
                #expect(error == .conflict && error.isStaleVersion && error.code == "precondition_failed")
            }
            let now = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(now.object.string("status") == "assigned")
            #expect(now.object.int("version") == seen.version + 1)
            // The session shows the fresh order; acting on it now goes through.
            #expect(await Self.until(session) { await $0.cachedDetail(OrderID(id))?.notes == "Gate 9" })
            try await session.changeStatus(of: OrderID(id), to: .accepted)
            #expect(await session.cachedDetail(OrderID(id))?.status == .accepted)
            await session.stop()
        }
    }

    /// The creation time the client sends (`If-Order-Created`, from the list row: the order is not
    /// opened) names the order as the real server stored it, through the client's JSON decoding and
    /// rounding: the actions apply, queued for any version and for the row's version, and sent
    /// directly.
    @Test func actionsOnAnOrderKnownFromTheListNameItAsTheServerStoredIt() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = OrderID(try #require(driver.orderIDs?.first))
            let session = try await Self.session(server, email: driver.email, password: driver.password)
            #expect(await Self.until(session) { await $0.orders.contains { $0.id == id } })
            let row = try #require(await session.orders.first { $0.id == id })
            let accept = try await session.queue(.changeStatus(of: id, to: .accepted), expecting: .any)
            #expect(accept.orderCreatedAt == row.createdAt && row.createdAt != nil)
            _ = try await session.queue(.attachDocument(name: "POD.pdf", kind: "proof_of_delivery", to: id), expecting: .version(row.version + 1))
            #expect(await Self.until(session) { await $0.pendingActions.isEmpty })
            let refused = await session.refusedActions
            #expect(refused.isEmpty, "\(refused)")
            try await session.changeStatus(of: id, to: .inProgress, expecting: .any)
            let order = try await server.request("GET", "/api/orders/\(id.rawValue)/", token: seed.dispatcherToken)
            #expect(order.object.string("status") == "in_progress")
            #expect((order.object["documents"] as? [[String: Any]])?.count == 1)
            await session.stop()
        }
    }

    @Test func afterARestartTheClientResumesAndShowsWhatChangedWhileTheServerWasDown() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let session = try await Self.session(server, email: driver.email, password: driver.password)
            #expect(await Self.until(session) { await $0.connectionState == .live })
            _ = try await session.detail(OrderID(id))
            let before = await session.lastEventID
            await server.stopServer()
            #expect(await Self.until(session) { await $0.connectionState != .live })
            try await server.writeNotesDirectly(order: id, company: seed.companyID, notes: "changed while down")
            try await server.startServer()
            // The 120 s poll cannot be what brings it: this must come from reconnect + resume.
            #expect(await Self.until(session, timeout: .seconds(30)) { await $0.connectionState == .live })
            #expect(await Self.until(session) { await $0.cachedDetail(OrderID(id))?.notes == "changed while down" })
            // The refetch after the reconnect may show the change before the replayed event is
            // processed; the event itself must arrive too and move the resume cursor.
            #expect(await Self.until(session) { session in
                let after = await session.lastEventID
                return after != nil && after != before
            })
            // A resume, not a `reset` and a full refetch (which would show the same notes): the
            // restarted server counted one resume and no reset.
            let metrics = try await server.request("GET", "/metrics").text
            func counter(_ name: String) -> Int? {
                metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ").last ?? "") }
            }
            #expect((counter("waybill_resumes_total") ?? 0) >= 1)
            #expect(counter("waybill_resets_total") == 0)
            await session.stop()
        }
    }

    /// A restore brings the id counter back too: an order created after the backup, which the
    /// driver accepted offline without a precondition, is gone, and the next order created gets its
    /// id. The accept must not apply to that order, which the driver never saw: the `reset` refuses
    /// it (found by a review; before, an action without `If-Match` still went).
    @Test func anActionWithoutAPreconditionQueuedBeforeARestoreIsNotAppliedToAnOrderThatReusedItsId() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let storage = InMemoryActionStorage()
            let session = try await Self.session(server, email: driver.email, password: driver.password, storage: storage)
            #expect(await Self.until(session) { await $0.connectionState == .live })
            let backup = try await server.backUp()  // with the driver's login
            let before = await session.lastEventID
            let created = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: ["title": "Lost in the restore", "driver_id": driver.id, "stages": [["kind": "stop", "address": "x"]]])
            let lost = try #require(created.object.int("id"))
            #expect(await Self.until(session) { await $0.orders.contains { $0.id == OrderID(Int64(lost)) } })
            // Its event reached the socket: the cursor is in the history the restore takes back. (A
            // list fetched ahead of the event, with the cursor still before it, is not covered: see
            // HARDENING.md.)
            #expect(await Self.until(session) { await ($0.lastEventID?.rawValue ?? 0) > (before?.rawValue ?? 0) })

            await server.stopServer()
            #expect(await Self.until(session) { await $0.connectionState != .live })
            let accept = try await session.queue(.changeStatus(of: OrderID(Int64(lost)), to: .accepted), expecting: .any)
            #expect(accept.ifMatch == nil)
            #expect(accept.orderCreatedAt != nil, "the order named by its creation time")
            try await server.restoreData(from: backup)
            try await server.startServer()
            let reused = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: ["title": "Never seen by the driver", "driver_id": driver.id, "stages": [["kind": "stop", "address": "y"]]])
            #expect(reused.object.int("id") == lost, "the restored counter gives the id again")

            #expect(await Self.until(session) { await !$0.refusedActions.isEmpty })
            if case .refused(let reason) = await session.refusedActions.first?.state {
                #expect(reason.code == "history_rewound")
            } else {
                Issue.record("not refused")
            }
            #expect(await session.pendingActions.isEmpty)
            let order = try await server.request("GET", "/api/orders/\(lost)/", token: seed.dispatcherToken)
            #expect(order.object.string("title") == "Never seen by the driver")
            #expect(order.object.string("status") == "assigned", "the accept was not applied to it")
            await session.stop()
        }
    }

    /// The case a `reset` cannot cover: the driver's list showed a new order before its event reached
    /// the socket, and coverage went just then, so the device's cursor is from before the order
    /// existed. The database is restored from a backup taken before the order; the cursor is still
    /// in the restored history, so no `reset` comes, and the next order created takes the id. The
    /// accept the driver queued for "any version" names the order by its creation time
    /// (`If-Order-Created`), and the server refuses it for the other order (412), which stays unchanged.
    @Test func anActionForAnOrderListedBeforeItsEventArrivedNeverReachesTheOrderThatTookItsId() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let transport = HoldingTransport(try LwsEventTransport(loop: try Self.loop.get()))
            let session = try await Self.session(
                server, email: driver.email, password: driver.password, transport: transport)
            #expect(await Self.until(session) { await $0.connectionState == .live })
            let backup = try await server.backUp()  // the session reconnects after it
            #expect(await Self.until(session) { session in
                let live = await session.connectionState == .live, loaded = await session.hasLoadedOrders
                return transport.connections.withLock { $0 } >= 2 && live && loaded
            })
            transport.holdingFrames.withLock { $0 = true }  // the order's event will not arrive
            let before = try await server.newestEventID()
            let created = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: ["title": "Lost in the restore", "driver_id": driver.id, "stages": [["kind": "stop", "address": "x"]]])
            let lost = OrderID(Int64(try #require(created.object.int("id"))))
            let createdAt = try #require(created.object.string("created_at"))
            await session.refresh()
            #expect(await Self.until(session) { await $0.orders.contains { $0.id == lost } })
            #expect((await session.lastEventID?.rawValue ?? 0) <= before, "the cursor is from before the order")

            transport.refusingConnections.withLock { $0 = true }
            await server.stopServer()
            #expect(await Self.until(session) { await $0.connectionState != .live })
            let accept = try await session.queue(.changeStatus(of: lost, to: .accepted), expecting: .any)
            #expect(accept.ifMatch == nil)
            #expect(accept.orderCreatedAt == (try Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(createdAt)))
            try await server.restoreData(from: backup)
            transport.holdingFrames.withLock { $0 = false }
            try await server.startServer()
            let reused = try await server.request(
                "POST", "/api/orders/", token: seed.dispatcherToken,
                json: ["title": "Never seen by the driver", "driver_id": driver.id, "stages": [["kind": "stop", "address": "y"]]])
            #expect(reused.object.int("id") == lost.rawValue, "the restored counter gives the id again")
            transport.refusingConnections.withLock { $0 = false }

            #expect(await Self.until(session) { await !$0.refusedActions.isEmpty })
            if case .refused(let reason) = await session.refusedActions.first?.state {
                #expect(reason.code == "order_replaced", "\(reason)")
            } else {
                Issue.record("not refused")
            }
            #expect(await session.pendingActions.isEmpty)
            let order = try await server.request("GET", "/api/orders/\(lost.rawValue)/", token: seed.dispatcherToken)
            #expect(order.object.string("title") == "Never seen by the driver")
            #expect(order.object.string("status") == "assigned", "the accept was not applied to it")
            await session.stop()
        }
    }

    /// The database is restored from a backup while a driver is offline with an action queued for
    /// the version they saw; before they come back, a dispatcher's edit gives the restored order that
    /// same version number with other content. The action must not apply to what the driver never
    /// saw: the resumed socket's `reset` refuses it (`history_rewound`), and the order is unchanged.
    /// With `loggedInAfterTheBackup`, the restore also lost the driver's login: the session stops
    /// (4001), the app logs in again, and the new session over the same action storage resumes from
    /// the cursor stored with the action, so it gets the `reset` too.
    @Test(arguments: [false, true])
    func anActionQueuedBeforeARestoreIsRefusedNotAppliedToAVersionTheDriverNeverSaw(loggedInAfterTheBackup: Bool) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let storage = InMemoryActionStorage()
            var backup = loggedInAfterTheBackup ? try await server.backUp() : nil
            var session = try await Self.session(server, email: driver.email, password: driver.password, storage: storage)
            if backup == nil { backup = try await server.backUp() }
            #expect(await Self.until(session) { await $0.connectionState == .live })
            _ = try await session.detail(OrderID(id))
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "seen by the driver"])
            #expect(await Self.until(session) { await $0.cachedDetail(OrderID(id))?.notes == "seen by the driver" })
            let seenVersion = try #require(await session.cachedDetail(OrderID(id))?.version)

            await server.stopServer()
            #expect(await Self.until(session) { await $0.connectionState != .live })
            let accept = try await session.queue(.changeStatus(of: OrderID(id), to: .accepted))
            #expect(accept.ifMatch?.hasPrefix("\"o\(id)-v\(seenVersion)") == true)
            try await server.restoreData(from: try #require(backup))
            try await server.writeNotesDirectly(order: id, company: seed.companyID, notes: "never seen by the driver")
            try await server.startServer()

            if loggedInAfterTheBackup {
                #expect(await Self.until(session) { await $0.connectionState == .stopped(.notAuthenticated) })
                await session.stop()
                session = try await Self.session(server, email: driver.email, password: driver.password, storage: storage)
            }
            #expect(await Self.until(session) { await !$0.refusedActions.isEmpty })
            let refused = await session.refusedActions
            #expect(refused.map(\.id) == [accept.id])
            if case .refused(let reason) = refused.first?.state {
                #expect(reason.code == "history_rewound")
            } else {
                Issue.record("not refused: \(String(describing: refused.first?.state))")
            }
            #expect(await session.pendingActions.isEmpty)
            let order = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(order.object.int("version") == seenVersion, "the restored order's version repeats")
            #expect(order.object.string("status") == "assigned", "the action was not applied")
            #expect(order.object.string("notes") == "never seen by the driver")
            // The driver is shown the restored order, not the lost one.
            _ = try await session.detail(OrderID(id))
            #expect(await Self.until(session) { await $0.cachedDetail(OrderID(id))?.notes == "never seen by the driver" })
            await session.stop()
        }
    }

    /// A server's 1013 (here: one socket more than the user may have) reaches the session as 1013,
    /// a close that asks it to come back later: libwebsockets hands the client 1002 instead, and
    /// a wake-up cut the backoff short (`LwsEventConnection.codeAsSent`).
    @Test func aServersBusyCloseReachesTheSessionAs1013() async throws {
        try await TestServer.withRunning(configure: { $0.maxSocketsPerUser = 1 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let first = try await Self.session(server, email: driver.email, password: driver.password)
            #expect(await Self.until(first) { await $0.connectionState == .live })
            let recording = HoldingTransport(try LwsEventTransport(loop: try Self.loop.get()))
            let second = try await Self.session(server, email: driver.email, password: driver.password, transport: recording)
            #expect(await server.eventually { !recording.closeCodes.isEmpty })
            #expect(recording.closeCodes.first == 1013)
            await second.stop()
            await first.stop()
        }
    }

    @Test func aRevokedTokenStopsTheClientWithTheReason() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let session = try await Self.session(server, email: driver.email, password: driver.password)
            #expect(await Self.until(session) { await $0.connectionState == .live })
            // Logging out everywhere revokes every token of the driver, the session's included.
            #expect(try await server.request("POST", "/api/auth/logout", token: driver.token).status == 204)
            #expect(await Self.until(session) { await $0.connectionState == .stopped(.notAuthenticated) })
        }
    }
}

/// A real transport whose sockets can lose their incoming frames (`holdingFrames`: the frames have
/// not arrived yet when coverage goes) and whose new sockets wait to open (`refusingConnections`:
/// a slow network, not a failure, so the session does not count it as a socket that cannot open).
/// It notes the close code each socket reports (`closeCodes`).
final class HoldingTransport: EventTransport {
    let inner: any EventTransport
    let holdingFrames = Mutex(false)
    let refusingConnections = Mutex(false)
    /// Sockets opened so far.
    let connections = Mutex(0)
    private let closes = Mutex<[Int?]>([])
    /// Close codes in the order the sockets reported them.
    var closeCodes: [Int?] { closes.withLock { $0 } }

    init(_ inner: any EventTransport) { self.inner = inner }

    func connect(_ request: SocketRequest) async throws -> any EventConnection {
        while refusingConnections.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(10)) }
        let connection = try await inner.connect(request)
        connections.withLock { $0 += 1 }
        return Connection(inner: connection, transport: self)
    }

    struct Connection: EventConnection {
        let inner: any EventConnection
        let messages: AsyncStream<SocketMessage>

        init(inner: any EventConnection, transport: HoldingTransport) {
            self.inner = inner
            messages = AsyncStream { continuation in
                let pump = Task {
                    for await message in inner.messages {
                        if case .text = message, transport.holdingFrames.withLock({ $0 }) { continue }
                        if case .closed(let code) = message { transport.closes.withLock { $0.append(code) } }
                        continuation.yield(message)
                    }
                    continuation.finish()
                }
                continuation.onTermination = { _ in pump.cancel() }
            }
        }

        func send(_ text: String) async { await inner.send(text) }
        func close(code: Int) async { await inner.close(code: code) }
    }
}
