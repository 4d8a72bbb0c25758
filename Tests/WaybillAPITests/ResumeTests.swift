import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// `?since=N`: exactly the missed events, in order, before any live one; then live with no gap.
@Suite(.timeLimit(.minutes(2)))
struct ResumeTests {
    @Test func reconnectWithSinceReplaysExactlyTheMissedEventsThenGoesLive() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (first, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["event_id"] as? Int)
            await first.close()
            var written: [Int64] = []
            for n in 0..<5 {
                _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
                written.append(id)
            }
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "since=\(cursor)")
            var ids: [Int] = []
            for _ in 0..<5 {
                let frame = try #require(await resumed.nextEvent())
                #expect(frame["type"] as? String == "order_updated")
                ids.append(try #require(frame["event_id"] as? Int))
            }
            #expect(ids == ids.sorted() && Set(ids).count == 5 && ids[0] > cursor)
            _ = try await server.request("POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "accepted"])
            let live = try #require(await resumed.nextEvent())
            #expect(live["type"] as? String == "order_status_changed")
            #expect((live["event_id"] as? Int ?? 0) > ids.last!)
            #expect(await resumed.nextEvent(timeout: .milliseconds(300)) == nil)
        }
    }

    /// The fleet stream resumes too: its replay reads its company's index rows (the outbox keeps
    /// one row for a company and its fleet, `EventGroupRows`), so a fleet map that reconnects gets
    /// the changes it missed, like the panel.
    @Test func theFleetStreamReplaysTheMissedEvents() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let (first, connected) = try await server.connectedSocket(token: seed.dispatcherToken, query: "stream=fleet")
            let cursor = try #require(connected["event_id"] as? Int)
            await first.close()
            for n in 0..<3 {
                _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
            }
            let (resumed, _) = try await server.connectedSocket(
                token: seed.dispatcherToken, query: "stream=fleet&since=\(cursor)")
            var ids: [Int] = []
            for _ in 0..<3 {
                let frame = try #require(await resumed.nextEvent())
                #expect(frame["type"] as? String == "order_updated")
                ids.append(try #require(frame["event_id"] as? Int))
            }
            #expect(ids == ids.sorted() && Set(ids).count == 3 && ids[0] > cursor)
            #expect(await resumed.nextEvent(timeout: .milliseconds(300)) == nil)
        }
    }

    /// The hard case: events committed while the replay query runs. Writes run without pause while
    /// the driver reconnects again and again; in the end the driver has seen every event of its
    /// group exactly once, in order.
    @Test func reconnectsDuringConcurrentWritesMissNothingAndDuplicateNothing() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0], orders = try #require(driver.orderIDs)
            let boss = seed.dispatcherToken
            let writer = Task {
                var n = 0
                while !Task.isCancelled && n < 400 {
                    _ = try? await server.request("PATCH", "/api/orders/\(orders[n % 2])/", token: boss, json: ["notes": "\(n)"])
                    n += 1
                }
            }
            var seen: [Int] = []
            var cursor = 0, initial = 0
            for round in 0..<15 {
                let query = round == 0 ? "" : "since=\(cursor)"
                let (socket, connected) = try await server.connectedSocket(token: driver.token, query: query)
                if round == 0 {
                    initial = try #require(connected["event_id"] as? Int)
                    cursor = initial
                }
                for _ in 0..<(3 + round % 4) {
                    guard let frame = await socket.nextEvent(timeout: .seconds(2)) else { break }
                    let eventID = try #require(frame["event_id"] as? Int)
                    seen.append(eventID)
                    cursor = eventID
                }
                await socket.close()
            }
            writer.cancel()
            await writer.value
            // Catch up on whatever is left, then compare with the outbox itself.
            // Up to the group's newest event, not up to the first quiet half second: a replay that
            // starts late on a busy machine would otherwise end the catch-up early.
            let resumeAt = cursor
            let newest = try await server.store.read { tx in
                try tx.events(of: .driver(UserID(driver.id)), after: EventID(Int64(resumeAt)), limit: 100_000).last
                    .map { Int($0.id.rawValue) } ?? resumeAt
            }
            let (last, _) = try await server.connectedSocket(token: driver.token, query: "since=\(cursor)")
            while (seen.last ?? 0) < newest, let frame = await last.nextEvent(timeout: .seconds(10)) {
                seen.append(frame["event_id"] as? Int ?? -1)
            }
            #expect(await last.nextEvent(timeout: .milliseconds(300)) == nil, "nothing after the newest")
            // From the first socket's `connected` position, not from the first event seen: a gap
            // right after `connected` would otherwise go unnoticed.
            let from = initial
            let expected = try await server.store.read { tx in
                try tx.events(of: .driver(UserID(driver.id)), after: EventID(Int64(from)), limit: 100_000).map { Int($0.id.rawValue) }
            }
            #expect(seen.count > 30)
            #expect(seen == expected)
        }
    }

    @Test func sinceOlderThanRetentionGetsResetFirst() async throws {
        try await TestServer.withRunning { server in
            let seed = try await Self.seedAndAgeEverythingOut(server)
            let driver = seed.drivers[0]
            let (socket, _) = try await server.connectedSocket(token: driver.token, query: "since=1")
            #expect(await socket.next()?["type"] as? String == "reset")
            _ = try await server.request("PATCH", "/api/orders/\(driver.orderIDs![0])/", token: seed.dispatcherToken, json: ["notes": "x"])
            #expect(await socket.nextEvent()?["type"] as? String == "order_updated")
        }
    }

    /// Every event aged out while nothing new happened: the newest stays, so a client resuming from the
    /// cursor its `connected` frame gave it is checked and goes live, with no `reset`. Once the newest
    /// went too, and every reconnect of every client was a reset and a refetch of everything.
    @Test func resumingFromTheNewestCursorAfterEverythingAgedOutIsNoReset() async throws {
        try await TestServer.withRunning { server in
            let seed = try await Self.seedAndAgeEverythingOut(server)
            let driver = seed.drivers[0]
            let (first, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["cursor"] as? String)
            await first.close()
            let (socket, _) = try await server.connectedSocket(token: driver.token, query: "cursor=\(cursor)")
            _ = try await server.request("PATCH", "/api/orders/\(driver.orderIDs![0])/", token: seed.dispatcherToken, json: ["notes": "x"])
            #expect(await socket.next()?["type"] as? String == "order_updated", "no reset before it")
        }
    }

    @Test func sinceBeyondTheNewestEventGetsReset() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let (socket, _) = try await server.connectedSocket(token: seed.drivers[0].token, query: "since=999999")
            #expect(await socket.next()?["type"] as? String == "reset")
            // After the reset the socket is live from the store's real newest id, not from 999999.
            let id = try #require(seed.drivers[0].orderIDs?.first)
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "x"])
            #expect(await socket.nextEvent()?["type"] as? String == "order_updated")
        }
    }

    /// A replay bigger than the socket's outbound queue could hold would end in 4008 again and again.
    @Test func replayTooBigForTheSocketQueueGetsResetInstead() async throws {
        try await TestServer.withRunning(configure: { $0.maxQueuedBytesPerSocket = 16 << 10 }) { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (first, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["event_id"] as? Int)
            await first.close()
            for n in 0..<60 {  // ~60 × 250 B: more than half of 16 KiB
                _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
            }
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "since=\(cursor)")
            #expect(await resumed.next()?["type"] as? String == "reset")
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "live"])
            #expect(await resumed.nextEvent()?["type"] as? String == "order_updated")
            #expect(await resumed.isClosed == false)
        }
    }

    @Test func eventsSurviveARestartAndIdsContinueUpward() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (socket, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["event_id"] as? Int)
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "before"])
            let beforeRestart = try #require(await socket.nextEvent()?["event_id"] as? Int)
            try await server.restart()
            #expect(await socket.closed() == 1001)
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "after"])
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "since=\(cursor)")
            let first = try #require(await resumed.nextEvent()?["event_id"] as? Int)
            let second = try #require(await resumed.nextEvent()?["event_id"] as? Int)
            #expect(first == beforeRestart)
            #expect(second > first)
        }
    }

    /// One driver with three orders, every event relayed, then pruned as if the retention had passed.
    static func seedAndAgeEverythingOut(_ server: TestServer) async throws -> Seeder.Result {
        let seed = try await server.seed(drivers: 1, orders: 3)
        try await waitUntilRelayed(server)
        let pruned = try await server.store.write { tx in try tx.pruneEvents(committedBefore: Date().addingTimeInterval(3600)) }
        #expect(pruned > 0)
        return seed
    }

    static func waitUntilRelayed(_ server: TestServer) async throws {
        // Up to 20 s: on the local path the relay saves its cursor about once a second.
        for _ in 0..<1000 {
            let (newest, relayed) = try await server.store.read { tx in (try tx.newestEventID(), try tx.relayedThrough()) }
            if relayed == newest { return }
            try await Task.sleep(for: .milliseconds(20))
        }
        Issue.record("relay did not catch up")
    }
}
