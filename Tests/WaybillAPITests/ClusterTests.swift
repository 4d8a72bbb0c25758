import Foundation
import Synchronization
import Testing
import WaybillAPI
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting

/// The failure contract of SPEC §6 with real processes: two `waybill serve` nodes on a real
/// PostgreSQL and Redis, which the tests kill and restart under load.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ClusterTests {
    @Test func aWriteOnOneNodeReachesSocketsOnTheOther() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            try await cluster.settle()
            let (panel, _) = try await cluster.socket(node: 1, token: seed.dispatcherToken)
            let (phone, _) = try await cluster.socket(node: 1, token: driver.token)
            let answer = try await cluster.request(
                node: 0, "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "gate 4"])
            #expect(answer.status == 200)
            for socket in [panel, phone] {
                let event = try #require(await socket.nextEvent(timeout: .seconds(20)))
                #expect(event["type"] as? String == "order_updated")
                #expect(event.int("order_id") == id)
                #expect((event["cursor"] as? String)?.hasPrefix("\(event.int("event_id") ?? -1)-") == true)
            }
        }
    }

    @Test func aSocketResumesOnAnotherNodeWithNothingLostOrRepeated() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            try await cluster.settle()
            let (first, _) = try await cluster.socket(node: 0, token: seed.dispatcherToken)
            for n in 1...3 { try await cluster.patchNotes(node: 0, order: id, "\(n)", token: seed.dispatcherToken) }
            var seen: [Int64] = []
            var cursorAfterFirst = ""
            for _ in 1...3 {
                let event = try #require(await first.nextEvent())
                seen.append(try #require(event.int("event_id")))
                if cursorAfterFirst.isEmpty { cursorAfterFirst = try #require(event["cursor"] as? String) }
            }
            await first.close()
            // Back on the other node from the first event's cursor: events 2 and 3 replayed, then live.
            let (second, _) = try await cluster.socket(node: 1, token: seed.dispatcherToken, query: "cursor=\(cursorAfterFirst)")
            try await cluster.patchNotes(node: 1, order: id, "4", token: seed.dispatcherToken)
            var resumed: [Int64] = []
            for _ in 1...3 { resumed.append(try #require(await second.nextEvent()?.int("event_id"))) }
            #expect(resumed.prefix(2) == seen.suffix(2))
            #expect(resumed[2] > seen[2])
            #expect(await second.nextEvent(timeout: .milliseconds(500)) == nil, "nothing twice")
        }
    }

    @Test func concurrentWritesToOneOrderFromTwoNodesLoseNoUpdate() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let before = try await cluster.request(node: 0, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let startVersion = try #require(before.object.int("version"))
            let perNode = 15
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for node in 0..<2 {
                    for n in 0..<perNode {
                        group.addTask {
                            try await cluster.request(
                                node: node, "POST", "/api/orders/\(id)/documents", token: seed.dispatcherToken,
                                json: ["name": "doc-\(node)-\(n)", "kind": "photo"]
                            ).status
                        }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.allSatisfy { (200..<300).contains($0) }, "\(statuses)")
            let after = try await cluster.request(node: 1, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let names = Set((after.object["documents"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
            #expect(names.count == 2 * perNode, "every document of every node is there")
            #expect(after.object.int("version") == startVersion + Int64(2 * perNode), "each write got its own version")
        }
    }

    /// Redis SIGKILLed for 10 s under a steady stream of writes through both nodes: every write
    /// succeeds and every socket on every node gets every event exactly once, in order. Frozen
    /// (SIGSTOP: connections stay open, nothing answers; the PING rule finds it) as well as killed
    /// (run live by a review, 2026-12-04; now a test).
    @Test(arguments: [false, true]) func redisDownForTenSecondsLosesNothing(frozen: Bool) async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            try await cluster.settle()
            let watchers = [
                try await EventCollector(cluster: cluster, node: 0, token: seed.dispatcherToken),
                try await EventCollector(cluster: cluster, node: 1, token: seed.dispatcherToken),
                try await EventCollector(cluster: cluster, node: 1, token: driver.token),
            ]
            let writes = 140  // 10 per second for 14 s; Redis is down from 2 s to 12 s
            let redis = cluster.redis
            async let outage: [Bool] = {
                try await Task.sleep(for: .seconds(2))
                if frozen { redis.freeze() } else { try await runBlocking { redis.kill() } }
                try await Task.sleep(for: .seconds(10))
                // Each node saw the outage before Redis came back (a frozen Redis that went unnoticed
                // would also deliver everything after the thaw: the checks below could not tell).
                let noticed = (0..<2).map { cluster.logged(node: $0, "broker subscription lost") }
                if frozen { redis.thaw() } else { try await runBlocking { try redis.start() } }
                return noticed
            }()
            var statuses: [Int] = []
            let clock = ContinuousClock(), start = clock.now
            for n in 0..<writes {
                try await clock.sleep(until: start + .milliseconds(100 * n))
                statuses.append(try await cluster.patchNotesStatus(node: n % 2, order: id, "w\(n)", token: seed.dispatcherToken))
            }
            #expect(try await outage == [true, true], "both nodes noticed the outage while it lasted")
            #expect(statuses.allSatisfy { $0 == 200 }, "every write succeeds while Redis is down: \(Set(statuses))")
            for watcher in watchers {
                let ids = try await watcher.collect(count: writes, timeout: .seconds(30))
                #expect(ids.count == writes, "every event arrives")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once")
                // On the sockets they had: a broker outage closes none (no mass 1012; SPEC), and the
                // collector's own reconnect-and-resume would otherwise hide it.
                let (reconnects, codes) = (await watcher.reconnects, await watcher.closeCodes)
                #expect(reconnects == 0, "closed with \(codes)")
            }
        }
    }

    /// A node that cannot reach Redis (down when it started, or cut off from it alone) and that
    /// leads the relay: its own sockets still get every event (it polls the store until it is
    /// subscribed), and so do the other node's (the leader steps down after failing to publish, and
    /// a subscribed feed that finds the store ahead reads the events itself). Either of those two
    /// is enough for this test; the step-down alone is proved by `OutboxRelayLeaseTests`.
    @Test func aLeaderThatCannotReachRedisHoldsNoNodesDeliveryBack() async throws {
        try await TestCluster.withRunning(nodes: 0) { cluster in
            // First and alone, so it takes the relay's lease; nothing listens on port 1.
            let cutOff = try await cluster.startNode(redisURL: "redis://127.0.0.1:1")
            #expect(
                await cluster.eventually { cluster.logged(node: cutOff, "outbox relay leads") },
                "the cut-off node leads (the case this test is about)")
            let healthy = try await cluster.startNode()
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            try await cluster.settle()  // the seed's events reached both nodes (from the store)
            let watchers = [
                try await EventCollector(cluster: cluster, node: cutOff, token: seed.dispatcherToken),
                try await EventCollector(cluster: cluster, node: healthy, token: seed.dispatcherToken),
            ]
            let writes = 6
            for n in 0..<writes {
                try await cluster.patchNotes(node: n % 2 == 0 ? healthy : cutOff, order: id, "w\(n)", token: seed.dispatcherToken)
                try await Task.sleep(for: .milliseconds(200))
            }
            for (index, watcher) in watchers.enumerated() {
                let ids = try await watcher.collect(count: writes, timeout: .seconds(20))
                #expect(ids.count == writes, "every event reaches node \(index)'s socket: \(ids)")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once")
            }
        }
    }

    /// Text that PostgreSQL cannot store or index (a NUL, an email past a b-tree row's limit) gets a
    /// client error on PostgreSQL too, never a 500 (SPEC §6: never a 500 for a client's mistake).
    @Test func inputPostgreSQLCannotStoreIsAClientErrorNeverA500() async throws {
        try await TestCluster.withRunning(nodes: 1) { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let token = seed.dispatcherToken
            // Random, so that PostgreSQL cannot compress it under its index row limit.
            let letters = Array("abcdefghijklmnopqrstuvwxyz0123456789")
            let longEmail = String((0..<3_000).map { _ in letters.randomElement()! }) + "@example.com"
            for email in ["a\u{0}b@example.com", longEmail] {
                let login = try await cluster.request(node: 0, "POST", "/api/auth/login", json: ["email": email, "password": "x"])
                #expect(login.status == 422, "login with a bad email: \(login.status) \(login.text.prefix(200))")
            }
            // libwebsockets cuts a path at a decoded NUL and refuses one in the query outright
            // (it closes the connection); neither reaches a store.
            let keyed = try await cluster.request(
                node: 0, "DELETE", "/api/orders/%00", token: token, headers: ["Idempotency-Key": "nul-path-1"])
            #expect(keyed.status < 500, "a NUL in the path: \(keyed.status) \(keyed.text.prefix(200))")
            let search = try? await cluster.request(node: 0, "GET", "/api/orders/?q=a%00b", token: token)
            #expect((search?.status ?? 0) < 500)
            #expect(try await cluster.request(node: 0, "GET", "/api/orders/", token: token).status == 200)
        }
    }

    /// `waybill seed --finished-per-driver` on PostgreSQL: a history larger than one old batch
    /// (2 000 orders in one transaction did not finish within the 4.5 s call budget).
    @Test func aLargeHistorySeedsOnPostgreSQL() async throws {
        try await TestCluster.withRunning(nodes: 0) { cluster in
            let seed = try await Seeder(store: cluster.store, passwordIterations: 1_000).seed(
                .init(companyName: "Past", drivers: 3, ordersPerDriver: 1, finishedPerDriver: 1_000))
            let company = CompanyID(seed.companyID)
            let counts = try await cluster.store.read { tx in try tx.orderCounts(in: company, driver: nil) }
            #expect(counts.values.reduce(0, +) == 3_003)
        }
    }

    /// A node SIGKILLed while writes go on through the other: its clients resume there with
    /// nothing lost and nothing twice (the relay lease moves if the dead node held it).
    @Test func aKilledNodesClientsResumeOnTheOtherWithNothingLost() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            try await cluster.settle()
            let watchers = [
                try await EventCollector(cluster: cluster, node: 0, token: seed.dispatcherToken, failover: 1),
                try await EventCollector(cluster: cluster, node: 0, token: driver.token, failover: 1),
            ]
            let writes = 60
            let clock = ContinuousClock(), start = clock.now
            for n in 0..<writes {
                try await clock.sleep(until: start + .milliseconds(100 * n))
                if n == 15 { await cluster.kill(node: 0) }
                let status = try await cluster.patchNotesStatus(node: 1, order: id, "w\(n)", token: seed.dispatcherToken)
                #expect(status == 200)
            }
            for watcher in watchers {
                let ids = try await watcher.collect(count: writes, timeout: .seconds(30))
                #expect(ids.count == writes, "every event arrives")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once")
                #expect(await watcher.reconnects >= 1, "the socket did move to the other node")
            }
        }
    }

    /// The relay's leader freezes (SIGSTOP for 8 s) while writes go on through the other node: its
    /// PostgreSQL session times out, the lease moves, and when the frozen node goes on it has
    /// stepped down. Every socket, on either node, gets every event once, in order (a publish the
    /// frozen leader had in flight is dropped by id downstream). Run live by a review (2026-12-04).
    /// Outside the freeze every other write goes through the leader itself, so the relay's shortcut
    /// for its own node's commits (published without a store read) runs too, and right after the
    /// thaw it runs while the new leader publishes the same events (a review, 2026-12-07).
    @Test func aFrozenRelayLeaderLosesTheLeaseAndNothingIsLostOrRepeated() async throws {
        try await TestCluster.withRunning(nodes: 1) { cluster in
            let (seed, id, second) = try await cluster.leaderAndFollower()
            let driver = seed.drivers[0]
            let watchers = [
                try await EventCollector(cluster: cluster, node: 0, token: driver.token),
                try await EventCollector(cluster: cluster, node: second, token: seed.dispatcherToken),
            ]
            let writes = 120
            let clock = ContinuousClock(), start = clock.now
            for n in 0..<writes {
                try await clock.sleep(until: start + .milliseconds(100 * n))
                if n == 10 { cluster.freeze(node: 0) }
                if n == 90 { cluster.thaw(node: 0) }
                let node = (n < 10 || n > 90) && n % 2 == 1 ? 0 : second
                let status = try await cluster.patchNotesStatus(node: node, order: id, "w\(n)", token: seed.dispatcherToken)
                #expect(status == 200, "write \(n) through node \(node)")
            }
            #expect(cluster.logged(node: second, "outbox relay leads"), "the lease moved while the leader was frozen")
            for watcher in watchers {
                let ids = try await watcher.collect(count: writes, timeout: .seconds(30))
                #expect(ids.count == writes, "every event arrives")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once")
            }
            #expect(await cluster.eventually { cluster.logged(node: 0, "outbox relay lost its lease") },
                "the thawed node noticed it no longer leads")
        }
    }

    /// A node stopped for a deploy (SIGTERM) refuses new connections at once, so a load balancer
    /// sends them to another node, and answers a write that arrives on a connection it had kept
    /// open (a balancer's pooled connection), then closes it. Before, it accepted and closed new
    /// connections and answered such a write 503: behind nginx a deploy cost 502s and 503s.
    @Test func aNodeStoppedForADeployRefusesConnectsAndAnswersWritesOnItsKeptConnections() async throws {
        try await TestCluster.withRunning(nodes: 1) { cluster in
            let seed = try await cluster.seed(drivers: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let port = cluster.ports[0]
            let kept = try await runBlocking { () -> RawConnection in
                let c = try RawConnection(port: port)
                try c.send(RawConnection.request("GET", "/healthz"))
                _ = try c.readResponse()
                return c
            }
            try #require(cluster.nodes[0] != nil)
            cluster.nodes[0]?.signal(SIGTERM)
            let refused = await cluster.eventually(timeout: .seconds(10)) { await connectIsRefused(port: port) }
            #expect(refused, "a connect after SIGTERM is refused")
            let answer = try await runBlocking { () -> RawHTTPResponse in
                let body = Array(#"{"notes":"written during the deploy"}"#.utf8)
                try kept.send(RawConnection.request(
                    "PATCH", "/api/orders/\(id)/",
                    headers: [("Authorization", "Bearer \(seed.dispatcherToken)"), ("Content-Type", "application/json")],
                    body: body))
                return try kept.readResponse()
            }
            #expect(answer.status == 200, "the write on the kept connection is answered: \(answer.text)")
            #expect(answer.header("connection") == "close")
            #expect(await cluster.nodes[0]?.exitStatus(timeout: .seconds(15)) == 0)
            let company = CompanyID(seed.companyID)
            let stored = try await cluster.store.read { tx in try tx.order(OrderID(id), in: company) }
            #expect(stored?.notes == "written during the deploy")
        }
    }

    /// The relay's leader is stopped for a deploy (SIGTERM) while writes go on through the other
    /// node: it closes its sockets with 1001 and releases the lease at once; its clients resume on
    /// the other node, which takes the lease over, with nothing lost and nothing twice.
    @Test func aGracefulLeaderHandoverLosesNothing() async throws {
        try await TestCluster.withRunning(nodes: 1) { cluster in
            let (seed, id, second) = try await cluster.leaderAndFollower()
            let driver = seed.drivers[0]
            let watchers = [
                try await EventCollector(cluster: cluster, node: 0, token: seed.dispatcherToken, failover: second),
                try await EventCollector(cluster: cluster, node: 0, token: driver.token, failover: second),
                try await EventCollector(cluster: cluster, node: second, token: driver.token),
            ]
            let writes = 60
            let clock = ContinuousClock(), start = clock.now
            // The writes go on while node 1 stops: run them beside the stop, not after it.
            async let written: [Int] = {
                var statuses: [Int] = []
                for n in 0..<writes {
                    try await clock.sleep(until: start + .milliseconds(100 * n))
                    statuses.append(try await cluster.patchNotesStatus(node: second, order: id, "w\(n)", token: seed.dispatcherToken))
                }
                return statuses
            }()
            try await clock.sleep(until: start + .milliseconds(1_500))
            await cluster.terminate(node: 0)
            #expect(try await written.allSatisfy { $0 == 200 })
            #expect(await cluster.eventually(timeout: .seconds(15)) { cluster.logged(node: second, "outbox relay leads") },
                "the lease moved")
            for (index, watcher) in watchers.enumerated() {
                let ids = try await watcher.collect(count: writes, timeout: .seconds(30))
                #expect(ids.count == writes, "every event arrives (watcher \(index))")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once (watcher \(index))")
                if index < 2 {
                    #expect(await watcher.reconnects >= 1, "the socket did move to the other node")
                    // A deploy says goodbye (1001); a killed node's sockets just drop.
                    let codes = await watcher.closeCodes
                    #expect(codes.first == .some(1001), "\(codes)")
                }
            }
        }
    }

    /// PostgreSQL stops for a few seconds under writes through both nodes, with sockets on both:
    /// every write is answered 200 or 503 `store_unavailable` within 5 s (never a 500, never a
    /// hang), the nodes recover by themselves, and every socket gets exactly the events of the
    /// writes that committed (counted by the order's versions: a write whose answer was lost may
    /// have committed), once each, in order.
    @Test func aPostgresOutageUnderWritesLosesNoCommittedEvent() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            try await cluster.settle()
            let before = try #require(try await cluster.request(node: 0, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken).object.int("version"))
            let watchers = [
                try await EventCollector(cluster: cluster, node: 0, token: driver.token),
                try await EventCollector(cluster: cluster, node: 1, token: seed.dispatcherToken),
            ]
            let postgres = cluster.postgres
            let writes = 80
            var answers: [Int: Int] = [:]
            let clock = ContinuousClock(), start = clock.now
            for n in 0..<writes {
                try await clock.sleep(until: start + .milliseconds(100 * n))
                if n == 20 { try await runBlocking { try postgres.stop(mode: .immediate) } }
                if n == 40 { try await runBlocking { try postgres.start() } }
                var status = 0
                let elapsed = try await clock.measure {
                    status = try await cluster.patchNotesStatus(node: n % 2, order: id, "w\(n)", token: seed.dispatcherToken)
                }
                #expect(status == 200 || status == 503, "write \(n) answered \(status)")
                // The server answers within its 4.5 s budget (SPEC: 5 s); a loaded runner's client side gets 1 s more.
                #expect(elapsed < .seconds(6), "write \(n) answered within 5 s")
                answers[status, default: 0] += 1
            }
            #expect((answers[503] ?? 0) > 0, "the outage was seen")
            let recovered = await cluster.eventually(timeout: .seconds(20)) {
                (try? await cluster.patchNotesStatus(node: 0, order: id, "last", token: seed.dispatcherToken)) == 200
            }
            #expect(recovered)
            var after: Int64?
            #expect(await cluster.eventually(timeout: .seconds(20)) {
                after = try? await cluster.request(node: 1, "GET", "/api/orders/\(id)/", token: seed.dispatcherToken).object.int("version")
                return after != nil
            }, "node 2 reads again too")
            let committed = Int(try #require(after) - before)
            #expect(committed >= (answers[200] ?? 0) + 1, "every write answered 200 committed")
            for watcher in watchers {
                let ids = try await watcher.collect(count: committed, timeout: .seconds(30))
                #expect(ids.count == committed, "one event per committed write")
                #expect(ids == ids.sorted() && Set(ids).count == ids.count, "in order, exactly once")
            }
        }
    }

    @Test func postgresRestartAnswers503ThenRecoversWithoutRestartingNodes() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            try await cluster.settle()
            let (panel, _) = try await cluster.socket(node: 1, token: seed.dispatcherToken)
            let postgres = cluster.postgres
            try await runBlocking { try postgres.stop(mode: .immediate) }
            let clock = ContinuousClock()
            var answer: TestResponse?
            let elapsed = try await clock.measure {
                answer = try await cluster.request(
                    node: 0, "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "down"])
            }
            #expect(answer?.status == 503)
            #expect(answer?.errorCode == "store_unavailable")
            #expect(elapsed < .seconds(5), "a write while the database is down is answered within 5 s")
            #expect(try await cluster.request(node: 0, "GET", "/readyz").status == 503)
            #expect(try await cluster.request(node: 0, "GET", "/healthz").status == 200, "the process itself is alive")
            try await runBlocking { try postgres.start() }
            let recovered = await cluster.eventually(timeout: .seconds(20)) {
                (try? await cluster.patchNotesStatus(node: 0, order: id, "back", token: seed.dispatcherToken)) == 200
            }
            #expect(recovered, "writes work again without restarting the node")
            #expect(try await cluster.request(node: 0, "GET", "/readyz").status == 200)
            let event = await panel.nextEvent(timeout: .seconds(10))
            #expect(event?["type"] as? String == "order_updated", "the other node's socket sees the write after recovery")
        }
    }

    @Test func logoutOnOneNodeClosesSocketsAndTokensOnTheOther() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let (phone, _) = try await cluster.socket(node: 1, token: driver.token)
            #expect(try await cluster.request(node: 1, "GET", "/api/me", token: driver.token).status == 200)  // now cached
            #expect(try await cluster.request(node: 0, "POST", "/api/auth/logout", token: driver.token).status == 204)
            let clock = ContinuousClock(), loggedOut = clock.now
            #expect(await phone.closed(timeout: .seconds(10)) == 4001)
            // Typically ~0.3 s (a 250 ms poll); the bound fails a node that does not poll, with
            // room for a stalled runner (the same check in CrossNodeSessionTests once took 1.52 s).
            #expect(clock.now - loggedOut < .seconds(5), "closed on the other node at its next poll")
            let refused = await cluster.eventually(timeout: .seconds(10)) {
                (try? await cluster.request(node: 1, "GET", "/api/me", token: driver.token).status) == 401
            }
            #expect(refused, "the revoked token stops working on the other node at its next poll")
        }
    }

    @Test func theLoginThrottleCountsFailuresOnEveryNode() async throws {
        try await TestCluster.withRunning { cluster in
            let seed = try await cluster.seed(drivers: 0, orders: 0)
            let email = seed.dispatcher.email
            var statuses: [Int] = []
            for n in 0..<12 {
                let answer = try await cluster.request(
                    node: n % 2, "POST", "/api/auth/login", json: ["email": email, "password": "wrong-\(n)"])
                statuses.append(answer.status)
            }
            #expect(statuses.prefix(10).allSatisfy { $0 == 401 }, "\(statuses)")
            #expect(statuses.suffix(2) == [429, 429], "ten failures across both nodes, not ten per node: \(statuses)")
        }
    }
}

extension TestCluster {
    /// Waits until every node has delivered every event committed so far (the seed's), so sockets
    /// opened afterwards see only what the test does.
    func settle(timeout: Duration = .seconds(15)) async throws {
        let newest = try await store.read { tx in try tx.newestEventID() }.rawValue
        for node in nodes.indices where nodes[node] != nil {
            let caughtUp = await eventually(timeout: timeout) {
                let metrics = (try? await self.request(node: node, "GET", "/metrics").text) ?? ""
                return Self.deliveredThrough(metrics) >= newest
            }
            try #require(caughtUp, "node\(node + 1) did not deliver the seed's events")
        }
    }

    /// `waybill_delivered_event_id` from a `/metrics` text.
    static func deliveredThrough(_ metrics: String) -> Int64 {
        for line in metrics.split(separator: "\n") where line.hasPrefix("waybill_delivered_event_id") {
            if let value = line.split(separator: " ").last.flatMap({ Double($0) }) { return Int64(value) }
        }
        return -1
    }

    /// With node 0 alone: seeds one driver with one order, waits until node 0 leads the relay, then
    /// starts a second node and lets both deliver the seed. Returns the seed, the order and the
    /// second node's index.
    func leaderAndFollower() async throws -> (seed: Seeder.Result, order: Int64, follower: Int) {
        let seed = try await seed(drivers: 1, orders: 1)
        let id = try #require(seed.drivers[0].orderIDs?.first)
        #expect(await eventually { self.logged(node: 0, "outbox relay leads") }, "the first node leads")
        let second = try await startNode()
        try await settle()
        return (seed, id, second)
    }

    func patchNotes(node: Int, order id: Int64, _ notes: String, token: String) async throws {
        let status = try await patchNotesStatus(node: node, order: id, notes, token: token)
        try #require(status == 200)
    }

    func patchNotesStatus(node: Int, order id: Int64, _ notes: String, token: String) async throws -> Int {
        try await request(node: node, "PATCH", "/api/orders/\(id)/", token: token, json: ["notes": notes]).status
    }
}

/// Reads one socket's order events in the background; if the socket drops it reconnects (to
/// `failover` if given, else the same node) with the last cursor it saw, as a client does.
actor EventCollector {
    private let cluster: TestCluster
    private let token: String
    private var node: Int
    private let failover: Int?
    private var ids: [Int64] = []
    private var cursor: String?
    private(set) var reconnects = 0
    /// How each socket it lost was closed (`nil`: dropped without a close frame).
    private(set) var closeCodes: [Int?] = []
    private var reader: Task<Void, Never>?

    init(cluster: TestCluster, node: Int, token: String, failover: Int? = nil) async throws {
        self.cluster = cluster
        self.token = token
        self.node = node
        self.failover = failover
        let (socket, connected) = try await cluster.socket(node: node, token: token)
        cursor = connected["cursor"] as? String
        start(socket)
    }

    private func start(_ socket: TestSocket) {
        reader = Task { await self.read(socket) }
    }

    private func read(_ socket: TestSocket) async {
        var socket = socket
        while !Task.isCancelled {
            if let frame = await socket.next(timeout: .seconds(1)) {
                if let type = frame["type"] as? String, type.hasPrefix("order_"), let id = frame.int("event_id") {
                    ids.append(id)
                    cursor = frame["cursor"] as? String ?? cursor
                }
                continue
            }
            guard await socket.isClosed else { continue }
            // Dropped: back with the last cursor, on the failover node if there is one.
            closeCodes.append(await socket.closed(timeout: .zero))
            reconnects += 1
            if let failover { node = failover }
            while !Task.isCancelled {
                let query = cursor.map { "cursor=\($0)" } ?? ""
                if let (next, _) = try? await cluster.socket(node: node, token: token, query: query) {
                    socket = next
                    break
                }
                try? await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    /// The event ids received once `count` arrived or `timeout` passed.
    func collect(count: Int, timeout: Duration) async throws -> [Int64] {
        let deadline = ContinuousClock.now + timeout
        while ids.count < count, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(50))
        }
        // A moment more so that a duplicate, if any, would be counted.
        try await Task.sleep(for: .milliseconds(300))
        reader?.cancel()
        return ids
    }
}
