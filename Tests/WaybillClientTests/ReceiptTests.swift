import Foundation
import Testing
import WaybillTesting

@testable import WaybillClient

/// SPEC §5 rule 7: after a fetch changed what is shown, the device reports the versions it now shows.
@Suite(.timeLimit(.minutes(1)))
struct ReceiptTests {
    /// The `seen` frames a socket carried, as `[[order: version]]`.
    func receipts(on connection: FakeConnection?) -> [[Int64: Int64]] {
        (connection?.sent ?? []).compactMap { text in
            guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
                object["type"] as? String == "seen", let orders = object["orders"] as? [[String: Any]]
            else { return nil }
            var versions: [Int64: Int64] = [:]
            for entry in orders {
                if let id = (entry["id"] as? NSNumber)?.int64Value,
                    let version = (entry["version"] as? NSNumber)?.int64Value
                {
                    versions[id] = version
                }
            }
            return versions
        }
    }

    @Test func whatIsShownIsReportedOnceWhenTheSocketGoesLive() async throws {
        let h = await Harness.live()
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        #expect(receipts(on: h.transport.current) == [[1: 1, 2: 1, 3: 1]])
    }

    @Test func aChangingFetchReportsOnlyTheNewVersionsAndA304ReportsNothing() async throws {
        let h = await Harness.live()
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        h.api.touch(2)
        await h.receiveEvents([(order: 2, eventID: 11)])
        await h.clock.advance(by: .milliseconds(250))
        await h.waitUntilIdle()
        await eventually("second receipt") { receipts(on: h.transport.current).count == 2 }
        #expect(receipts(on: h.transport.current).last == [2: 2])

        // An event whose refetch answers 304 changed nothing on screen: no receipt.
        let fetches = h.api.listFetches
        await h.receiveEvents([(order: 3, eventID: 12)])
        await h.clock.advance(by: .milliseconds(250))
        await h.waitUntilIdle()
        #expect(h.api.listFetches == fetches + 1)
        await h.settle()
        #expect(receipts(on: h.transport.current).count == 2)
    }

    @Test func anOpenedDetailNewerThanItsRowIsReported() async throws {
        let h = await Harness.live()
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        h.api.touch(3)
        try await h.open(3)  // the detail shows v2 before the list does
        await eventually("detail receipt") { receipts(on: h.transport.current).count == 2 }
        #expect(receipts(on: h.transport.current).last == [3: 2])
    }

    /// The detail's refetch failed and the list's did not: the row shows v2, the opened detail
    /// (with the stages and notes) still v1. The device has not seen v2's content.
    @Test func anOpenedDetailOlderThanItsRowIsWhatIsReported() async throws {
        let h = await Harness.live()
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        try await h.open(3)
        h.api.touch(3)
        h.api.failDetails([.http(status: 503, code: "store_unavailable", message: "down")])
        await h.receiveEvents([(order: 3, eventID: 11)])
        await h.clock.advance(by: .milliseconds(250))
        await h.waitUntilIdle()
        await eventually("list shows v2") { await h.session.orders.first { $0.id == 3 }?.version == 2 }
        await h.settle()
        #expect(receipts(on: h.transport.current).allSatisfy { $0[3] != 2 }, "\(receipts(on: h.transport.current))")
    }

    @Test func nothingIsSentWhileOfflineAndAReconnectReportsEverythingShownAgain() async throws {
        let h = await Harness.live(
            configuration: .init(reconnectPolicy: .init(base: .seconds(1), cap: .seconds(1), jitter: .none)))
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        let first = h.transport.current
        await h.drop(code: 1006)
        h.api.touch(1)
        await h.session.refresh()  // fetched while offline: shown, but not reported (no socket)
        await h.clock.advance(by: .milliseconds(250))
        await eventually("list shows v2") { await h.session.orders.first { $0.id == 1 }?.version == 2 }
        #expect(receipts(on: first).count == 1)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        h.transport.current?.receiveConnected()
        await eventually("receipt on the new socket") { receipts(on: h.transport.current).count == 1 }
        #expect(receipts(on: h.transport.current) == [[1: 2, 2: 1, 3: 1]])
    }

    /// A live session that has seen event 11, its socket dropped, and a new socket that resumes
    /// (the test plays the pong): `connected` received and the reconnect's list refetch in.
    func resumed() async throws -> (Harness, FakeConnection) {
        let h = await Harness.live(
            configuration: .init(
                reconnectPolicy: .init(base: .seconds(1), cap: .seconds(1), jitter: .none), resumeCheckLimit: .seconds(10)))
        await eventually("first receipt") { receipts(on: h.transport.current).count == 1 }
        h.transport.current?.receiveEvent(order: 2, eventID: 11)
        await eventually("event 11 read") { await h.session.lastEventID == 11 }
        let socket = try await h.dropAndResume()
        return (h, socket)
    }

    /// Before a resume's outcome a `reset` may still come, and after a restore a version number can
    /// name content the driver never saw: receipts wait for the pong (or the reset's refetch).
    @Test func receiptsWaitForTheResumesOutcome() async throws {
        let (h, socket) = try await resumed()
        #expect(receipts(on: socket).isEmpty, "nothing reported while a reset may still come")
        socket.receive(#"{"type":"pong"}"#)
        await eventually("reported after the pong") { receipts(on: socket).count == 1 }
        #expect(receipts(on: socket) == [[1: 1, 2: 1, 3: 1]])
        _ = h
    }

    /// A `reset` while receipts wait: nothing read before it is reported, neither at the reset nor
    /// by the first refetch that lands; only what the refetch brings (here order 1 at v2).
    @Test func aResetWhileReceiptsWaitReportsOnlyWhatTheRefetchBrings() async throws {
        let (h, socket) = try await resumed()
        h.api.touch(1)  // the server's order 1 is at v2 now; the screen still shows v1
        await h.receiveOpeningTheWindow(#"{"type":"reset"}"#, on: socket)
        await h.settle()
        #expect(receipts(on: socket).isEmpty, "nothing from before the reset")
        await h.clock.advance(by: .milliseconds(250))
        await eventually("reported after the reset's refetch") { receipts(on: socket).count == 1 }
        #expect(receipts(on: socket) == [[1: 2, 2: 1, 3: 1]])
    }

    /// A `reset` after the wait's limit (receipts already went): the refetch's versions are reported
    /// again, though their numbers are the same (they may name other content now).
    @Test func aResetReportsWhatTheRefetchBringsAgain() async throws {
        let (h, socket) = try await resumed()
        await h.clock.advance(by: .seconds(10))  // no outcome within the limit: receipts go
        await eventually("reported at the limit") { receipts(on: socket).count == 1 }
        await h.receiveOpeningTheWindow(#"{"type":"reset"}"#, on: socket)
        await h.clock.advance(by: .milliseconds(250))
        await eventually("reported again after the reset's refetch") { receipts(on: socket).count == 2 }
        #expect(receipts(on: socket).last == [1: 1, 2: 1, 3: 1])
    }

    /// A list fetch begun before a `reset` and answered after it: its tag is not kept, so the
    /// reset's refetch reads the list whole (not a 304 against the old history's tag) and receipts
    /// name the rows. They left every row out until the list changed.
    @Test func aListFetchBegunBeforeAResetDoesNotKeepItsTag() async throws {
        let (h, socket) = try await resumed()
        h.api.holdLists(true)
        await h.session.refresh()
        await eventually("a list fetch in flight") { h.api.heldListCount == 1 }
        let before = h.api.listRequests.count
        await h.receiveOpeningTheWindow(#"{"type":"reset"}"#, on: socket)
        await h.settle()
        h.api.touch(1)  // the held fetch answers 200 with the new list and its tag
        h.api.holdLists(false)
        h.api.releaseLists()
        await h.clock.advance(by: .milliseconds(250))
        await eventually("the reset's refetch") { h.api.listRequests.count > before }
        #expect(h.api.listRequests.dropFirst(before).allSatisfy { $0 == nil }, "\(h.api.listRequests)")
        await eventually("the rows reported after the reset") { receipts(on: socket).count == 1 }
        #expect(receipts(on: socket) == [[1: 2, 2: 1, 3: 1]])
    }

    @Test func theFrameListsOrdersByIDInTheWireShape() {
        var tracker = ReceiptTracker()
        let receipts = tracker.unreported([3: 2, 1: 5])
        #expect(
            ReceiptTracker.frames(receipts) == [
                #"{"type":"seen","orders":[{"id":1,"version":5},{"id":3,"version":2}]}"#
            ])
        #expect(tracker.unreported([3: 2, 1: 5]).isEmpty)
        #expect(tracker.unreported([3: 3, 1: 5]) == [.init(order: 3, version: 3)])
        tracker.connectionOpened()
        #expect(tracker.unreported([3: 3]).count == 1)
    }

    /// The server closes a socket that sends more than 4 KiB at once (1009); a long list goes in pieces.
    @Test func manyReceiptsAreSplitIntoFramesTheServerAccepts() {
        let huge = (1...200).map { ReceiptTracker.Receipt(order: OrderID(Int64.max - $0), version: Int64.max - 1) }
        let frames = ReceiptTracker.frames(huge)
        #expect(frames.count == 4)
        #expect(frames.allSatisfy { $0.utf8.count <= 4096 })
        let ids = frames.flatMap { frame -> [Int64] in
            let object = try? JSONSerialization.jsonObject(with: Data(frame.utf8)) as? [String: Any]
            return (object?["orders"] as? [[String: Any]] ?? []).compactMap { ($0["id"] as? NSNumber)?.int64Value }
        }
        #expect(ids == huge.map(\.order.rawValue))
    }
}
