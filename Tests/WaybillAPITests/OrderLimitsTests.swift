import Foundation
import Testing
import WaybillAPI
import WaybillDomain

/// What one order may hold and when it may still change (found by a read-only review):
/// documents per order, text weighed in bytes too, finished orders, edits that change nothing.
@Suite(.timeLimit(.minutes(1)))
struct OrderLimitsTests {
    /// One order holds at most `Order.maxDocuments` documents: every write to it reads them all
    /// on the store's one writer, so without a bound one order slowed every tenant's writes.
    @Test func anOrderTakesAtMostItsDocumentLimit() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            for n in 0..<Order.maxDocuments {
                let attached = try await server.request(
                    "POST", "/api/orders/\(id)/documents", token: seed.dispatcherToken, json: ["name": "d\(n)", "kind": "x"])
                #expect(attached.status == 201)
            }
            let over = try await server.request(
                "POST", "/api/orders/\(id)/documents", token: seed.dispatcherToken, json: ["name": "one more", "kind": "x"])
            #expect(over.status == 409)
            #expect(over.errorCode == "conflict")
        }
    }

    /// A character may carry any number of combining marks: the limits count bytes too (four per
    /// character), so 200 "characters" cannot weigh a megabyte.
    @Test func textLimitsCountBytesToo() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            let heavy = "a" + String(repeating: "\u{0301}", count: 5_000)  // one character, 10 001 bytes
            #expect(heavy.count == 1)
            let title = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": heavy])
            #expect(title.status == 422)
            let document = try await server.request(
                "POST", "/api/orders/\(id)/documents", token: seed.dispatcherToken, json: ["name": heavy, "kind": "x"])
            #expect(document.status == 422)
            // Ordinary text in any script still fits: 200 emoji of four bytes, 200 Devanagari
            // syllables of a consonant and its vowel sign (6 bytes each), and notes of them.
            for title in [String(repeating: "😀", count: 200), String(repeating: "कि", count: 200)] {
                #expect(title.count == 200)
                let fits = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["title": title])
                #expect(fits.status == 200, "\(title.utf8.count) bytes")
            }
            let notes = String(repeating: "कि", count: 9_000)
            let long = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": notes])
            #expect(long.status == 200, "54 000 bytes of notes in 9 000 characters")
        }
    }

    /// A cancelled order takes no documents (the driver's queued action is refused, SPEC §5.8); a
    /// completed one does (a delivery note after the last stage) and keeps its stages.
    @Test func finishedOrders() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 2)
            let driver = seed.drivers[0], boss = seed.dispatcherToken
            let ids = try #require(driver.orderIDs)
            let cancelled = try await server.request("POST", "/api/orders/\(ids[0])/status", token: boss, json: ["status": "cancelled"])
            #expect(cancelled.status == 200)
            let refused = try await server.request(
                "POST", "/api/orders/\(ids[0])/documents", token: driver.token, json: ["name": "late.pdf", "kind": "x"])
            #expect(refused.status == 409)

            for next in ["accepted", "in_progress", "completed"] {
                let moved = try await server.request("POST", "/api/orders/\(ids[1])/status", token: driver.token, json: ["status": next])
                #expect(moved.status == 200, "\(next)")
            }
            let note = try await server.request(
                "POST", "/api/orders/\(ids[1])/documents", token: driver.token, json: ["name": "signed.pdf", "kind": "pod"])
            #expect(note.status == 201)
            let restaged = try await server.request(
                "PATCH", "/api/orders/\(ids[1])/", token: boss, json: ["stages": [["kind": "stop", "address": "Elsewhere"]]])
            #expect(restaged.status == 409)
            let corrected = try await server.request("PATCH", "/api/orders/\(ids[1])/", token: boss, json: ["notes": "signed by J."])
            #expect(corrected.status == 200)
        }
    }

    /// A `PATCH {}` makes no new version and no event: a driver's queued action holding the
    /// current version is not refused with 412 for it.
    @Test func anEmptyPatchIsNoNewVersion() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (socket, _) = try await server.connectedSocket(token: driver.token)
            let current = try await server.request("GET", "/api/orders/\(id)/", token: seed.dispatcherToken)
            let version = try #require(current.object.int("version"))
            let etag = try #require(current.headers["etag"] ?? current.headers["ETag"])
            let empty = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: [String: Any]())
            #expect(empty.status == 200)
            #expect(empty.object.int("version") == version)
            let moved = try await server.request(
                "POST", "/api/orders/\(id)/status", token: driver.token, json: ["status": "accepted"],
                headers: ["If-Match": etag])
            #expect(moved.status == 200)
            // The first event the driver gets is the status change: the empty edit sent none.
            let event = try #require(await socket.nextEvent())
            #expect(event["type"] as? String == "order_status_changed")
        }
    }
}
