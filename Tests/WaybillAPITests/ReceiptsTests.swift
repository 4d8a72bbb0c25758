import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillSQLite
import WaybillStorage

/// Read receipts end to end (SPEC §2 "Receipts", §3 `order_seen`, §4 `seen`): a driver's socket
/// reports what its device shows; the panel and the fleet hear of it; the API shows it.
@Suite(.timeLimit(.minutes(1)))
struct ReceiptsTests {
    static func seen(_ entries: [(Int64, Int64)]) -> String {
        "{\"type\":\"seen\",\"orders\":["
            + entries.map { "{\"id\":\($0.0),\"version\":\($0.1)}" }.joined(separator: ",") + "]}"
    }

    /// The next `order_seen` frame (other events are skipped), or nil after `timeout`.
    static func nextSeen(_ socket: TestSocket, timeout: Duration = .seconds(20)) async -> JSONFrame? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            guard let frame = await socket.nextEvent(timeout: deadline - .now) else { return nil }
            if frame["type"] as? String == "order_seen" { return frame }
        }
        return nil
    }

    @Test func aDriversReceiptReachesPanelAndFleetAndTheAPI() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0]
            let id = try #require(driver.orderIDs?.first)
            let before = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect(before.object["seen"] is NSNull)
            let version = try #require(before.object.int("version"))
            let oldTag = try #require(before.headers["etag"])
            #expect(IfMatchTests.isOrderTag(oldTag, id: id, version: version), "\(oldTag)")

            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (fleet, _) = try await server.connectedSocket(token: seed.dispatcherToken, query: "stream=fleet")
            let (phone, _) = try await server.connectedSocket(token: driver.token)
            await phone.send(Self.seen([(id, version)]))

            let event = try #require(await Self.nextSeen(panel))
            #expect(event.int("order_id") == id && event.int("id") == id)
            #expect(event.int("driver_id") == driver.id)
            let receipt = try #require(event["seen"] as? [String: Any])
            #expect(receipt.int("version") == version && receipt.int("driver_id") == driver.id)
            #expect(await Self.nextSeen(fleet)?.int("order_id") == id)

            let detail = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let seen = try #require(detail.object["seen"] as? [String: Any])
            #expect(seen.int("driver_id") == driver.id && seen.int("version") == version)
            #expect(seen.string("at") == receipt.string("at"))
            #expect(detail.object.int("version") == version, "a receipt is not a change of the order")
            let rows = try await server.request("GET", "/api/orders/?ids=\(id)", token: seed.dispatcherToken).array
            #expect((rows.first?["seen"] as? [String: Any])?.int("version") == version)

            // The detail's old tag must not answer 304: the panel would keep showing "not seen".
            let revalidated = try await server.request(
                "GET", "/api/orders/\(id)/", token: seed.dispatcherToken, headers: ["If-None-Match": oldTag])
            #expect(revalidated.status == 200)
            let newTag = try #require(revalidated.headers["etag"])
            #expect(IfMatchTests.isOrderTag(newTag, id: id, version: version, seen: version), "\(newTag)")
            let unchanged = try await server.request(
                "GET", "/api/orders/\(id)/", token: seed.dispatcherToken, headers: ["If-None-Match": newTag])
            #expect(unchanged.status == 304)
            // Both tags still name the version for If-Match: a receipt never makes a write fail.
            let renamed = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": "Renamed"],
                headers: ["If-Match": oldTag])
            #expect(renamed.status == 200)
            let stale = try await server.request(
                "PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": "Again"],
                headers: ["If-Match": newTag])
            #expect(stale.status == 412, "version \(version) is not current any more")
            // The change makes the receipt old: still shown, for the older version.
            let changed = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            #expect((changed.object["seen"] as? [String: Any])?.int("version") == version)
            #expect(changed.object.int("version") == version + 1)

            // The driver's own socket never gets order_seen (only the PATCH's order_updated).
            #expect(await phone.nextEvent()?["type"] as? String == "order_updated")
            #expect(await phone.nextEvent(timeout: .milliseconds(300)) == nil)
        }
    }

    @Test func foreignOrdersFutureVersionsAndDispatchersAreIgnored() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 2, orders: 2)
            let (alice, bob) = (seed.drivers[0], seed.drivers[1])
            let alicesOrder = try #require(alice.orderIDs?.first)
            let alicesOther = try #require(alice.orderIDs?.last)
            let bobsOrder = try #require(bob.orderIDs?.first)
            let version = try #require(
                try await server.request("GET", "/api/orders/\(alicesOrder)/", token: seed.dispatcherToken).object.int(
                    "version"))
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (alicePhone, _) = try await server.connectedSocket(token: alice.token)

            // A dispatcher's socket cannot report for a driver (that the hub itself writes nothing
            // for it: `HubBookkeepingTests.aDispatchersSeenWritesNothing`).
            await panel.send(Self.seen([(alicesOrder, version)]))
            // Bob's order, a version that does not exist yet, garbage: nothing.
            await alicePhone.send(Self.seen([(bobsOrder, 1)]))
            await alicePhone.send(Self.seen([(alicesOther, 99)]))
            await alicePhone.send(#"{"type":"seen","orders":"all"}"#)
            await alicePhone.send(#"{"type":"ping"}"#)
            #expect(await alicePhone.next()?["type"] as? String == "pong", "the socket is still served")
            // Then a real receipt: the first (and only) order_seen the panel gets.
            await alicePhone.send(Self.seen([(alicesOrder, version)]))
            let event = try #require(await Self.nextSeen(panel))
            #expect(event.int("order_id") == alicesOrder)
            #expect(event.int("driver_id") == alice.id)
            #expect((event["seen"] as? [String: Any])?.int("version") == version)
            #expect(await Self.nextSeen(panel, timeout: .milliseconds(1_500)) == nil)

            for other in [bobsOrder, alicesOther] {
                let detail = try await server.request("GET", "/api/orders/\(other)/", token: seed.dispatcherToken)
                #expect(detail.object["seen"] is NSNull)
            }
            let alices = try await server.request("GET", "/api/orders/\(alicesOrder)/", token: alice.token)
            #expect((alices.object["seen"] as? [String: Any])?.int("version") == version)
        }
    }

    /// SPEC §4: at most one store write per socket per second; what waits is merged.
    @Test func receiptsOfOneSocketAreWrittenAtMostOncePerSecond() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 3)
            let driver = seed.drivers[0]
            let ids = try #require(driver.orderIDs)
            try #require(ids.count == 3)
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (phone, _) = try await server.connectedSocket(token: driver.token)
            let newest = try await server.store.read { tx in try tx.newestEventID() }

            for id in ids { await phone.send(Self.seen([(id, 1)])) }
            var seenOrders: [Int64] = []
            for _ in ids { seenOrders.append(try #require(await Self.nextSeen(panel)?.int("order_id"))) }
            #expect(Set(seenOrders) == Set(ids))

            let events = try await server.store.read { tx in try tx.events(after: newest, limit: 10) }
                .filter { $0.event.type == .seen }
            try #require(events.count == 3)
            // The first went out at once; the other two waited for the second and went together.
            #expect(events[0].event.orderID.rawValue == ids[0])
            #expect(events[1].committedAt == events[2].committedAt)
            #expect(events[1].event.changedAt == events[2].event.changedAt)
            #expect(events[1].event.changedAt.timeIntervalSince(events[0].event.changedAt) >= 0.95)
        }
    }

    /// A driver's sockets share one pace: a second socket, or a socket opened right after one
    /// closed, does not buy a write of its own (a driver looping open, `seen`, close wrote once
    /// per loop on the store's one writer).
    @Test(arguments: [false, true]) func aDriversSocketsShareOneWritePerSecond(closeFirst: Bool) async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0]
            let ids = try #require(driver.orderIDs)
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let newest = try await server.store.read { tx in try tx.newestEventID() }
            let (first, _) = try await server.connectedSocket(token: driver.token)
            await first.send(Self.seen([(ids[0], 1)]))
            #expect(await Self.nextSeen(panel)?.int("order_id") == ids[0])
            if closeFirst { await first.close() }
            let (second, _) = try await server.connectedSocket(token: driver.token)
            await second.send(Self.seen([(ids[1], 1)]))
            #expect(await Self.nextSeen(panel)?.int("order_id") == ids[1])
            let events = try await server.store.read { tx in try tx.events(after: newest, limit: 10) }
                .filter { $0.event.type == .seen }
            try #require(events.count == 2)
            #expect(events[1].event.changedAt.timeIntervalSince(events[0].event.changedAt) >= 0.95)
        }
    }

    /// A receipt sent right before the socket closes is still recorded.
    @Test func aReceiptSentJustBeforeClosingIsKept() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0]
            let ids = try #require(driver.orderIDs)
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken)
            let (phone, _) = try await server.connectedSocket(token: driver.token)
            await phone.send(Self.seen([(ids[0], 1)]))
            #expect(await Self.nextSeen(panel)?.int("order_id") == ids[0])
            await phone.send(Self.seen([(ids[1], 1)]))
            await phone.send(#"{"type":"ping"}"#)
            #expect(await phone.next()?["type"] as? String == "pong")  // the hub has read the seen frame
            await phone.close()
            #expect(await Self.nextSeen(panel)?.int("order_id") == ids[1])
        }
    }
}
