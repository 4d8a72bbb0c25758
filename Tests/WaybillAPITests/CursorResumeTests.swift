import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// `?cursor=<id>-<check>`: a replay only when the store's event under that id is the one the client saw.
@Suite(.timeLimit(.minutes(1)))
struct CursorResumeTests {
    @Test func resumeByCursorReplaysTheMissedEventsThenGoesLive() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (first, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["cursor"] as? String)
            #expect(EventCursor(parsing: cursor) != nil)
            await first.close()
            for n in 0..<3 {
                _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
            }
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "cursor=\(cursor)")
            var cursors: [String] = []
            for _ in 0..<3 {
                let frame = try #require(await resumed.nextEvent())
                cursors.append(try #require(frame["cursor"] as? String))
            }
            let ids = cursors.compactMap { EventCursor(parsing: $0)?.id.rawValue }
            #expect(ids.count == 3 && ids == ids.sorted() && ids[0] > EventCursor(parsing: cursor)!.id.rawValue)
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "live"])
            let live = try #require(await resumed.nextEvent())
            #expect((live["event_id"] as? Int).map(Int64.init) ?? 0 > ids.last!)
        }
    }

    /// A pong names the node's newest delivered event, also when none of it was this driver's: a
    /// socket up for days resumes from there, not from its last own event, which the retention
    /// may have pruned by then (a needless `reset` that refuses the driver's queued actions).
    /// Resuming from the pong's cursor replays nothing and is no `reset`.
    @Test func aPongNamesTheNewestDeliveredEventAndResumingFromItIsNoReset() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 1)
            let driver = seed.drivers[0], other = try #require(seed.drivers[1].orderIDs?.first)
            let (socket, connected) = try await server.connectedSocket(token: driver.token)
            let start = try #require((connected["event_id"] as? Int).map(Int64.init))
            for n in 0..<3 {  // another driver's order: nothing of it reaches this socket
                _ = try await server.request("PATCH", "/api/orders/\(other)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
            }
            let newest = try await server.store.read { tx in try tx.newestEventID() }
            #expect(newest.rawValue > start)
            var pong: JSONFrame?
            for _ in 0..<50 {  // the hub delivers the events just after their commits
                await socket.send(#"{"type":"ping"}"#)
                pong = await socket.next()
                if (pong?["event_id"] as? Int).map(Int64.init) == newest.rawValue { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(pong?["type"] as? String == "pong")
            #expect((pong?["event_id"] as? Int).map(Int64.init) == newest.rawValue)
            let cursor = try #require(pong?["cursor"] as? String)
            #expect(EventCursor(parsing: cursor)?.id == newest)
            await socket.close()
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "cursor=\(cursor)")
            await resumed.send(#"{"type":"ping"}"#)
            #expect(await resumed.next()?["type"] as? String == "pong", "no reset, no replay")
        }
    }

    @Test func cursorWithAnotherFingerprintGetsReset() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (_, connected) = try await server.connectedSocket(token: driver.token)
            let text = try #require(connected["cursor"] as? String)
            let real = try #require(EventCursor(parsing: text))
            let forged = EventCursor(id: real.id, check: real.check == "00000000" ? "00000001" : "00000000")
            let (socket, _) = try await server.connectedSocket(token: driver.token, query: "cursor=\(forged)")
            #expect(await socket.next()?["type"] as? String == "reset")
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "x"])
            #expect(await socket.nextEvent()?["type"] as? String == "order_updated")
        }
    }

    /// A resume the server cannot read (a cursor of another format, `since=12.0`, a negative id) gets
    /// `reset`: going live from the newest event instead would skip what the client missed,
    /// silently, and `since=-1` read as 0 replayed the whole retained history.
    @Test(arguments: ["cursor=12-zz", "cursor=garbage", "since=12.0", "since=x", "since=-1", "cursor=1-ABCDEF0123"])
    func aResumeTheServerCannotReadGetsReset(query: String) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (socket, _) = try await server.connectedSocket(token: driver.token, query: query)
            #expect(await socket.next()?["type"] as? String == "reset")
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "x"])
            #expect(await socket.nextEvent()?["type"] as? String == "order_updated")
        }
    }

    /// The check written in capitals is the same cursor.
    @Test func aCursorWithItsCheckInCapitalsReplays() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (first, connected) = try await server.connectedSocket(token: driver.token)
            let cursor = try #require(connected["cursor"] as? String)
            await first.close()
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "x"])
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "cursor=\(cursor.uppercased())")
            #expect(await resumed.next()?["type"] as? String == "order_updated")
        }
    }

    @Test func cursorOfAnEventThatDoesNotExistGetsReset() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let (socket, _) = try await server.connectedSocket(token: seed.drivers[0].token, query: "cursor=999999-0badc0de")
            #expect(await socket.next()?["type"] as? String == "reset")
        }
    }

    @Test func theOriginCursorReplaysEverything() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let (socket, _) = try await server.connectedSocket(token: seed.drivers[0].token, query: "cursor=0-00000000")
            let first = try #require(await socket.next())
            #expect(first["type"] as? String == "order_created")
            #expect(await socket.nextEvent()?["type"] as? String == "order_created")
        }
    }
}
