import Testing
import WaybillTesting

@testable import WaybillClient

/// SPEC §5 rules 5 and 6: resume with the last cursor seen; after `reset`, continue from the server's newest.
@Suite(.timeLimit(.minutes(1))) struct ResumeCursorTests {
    typealias Machine = DriverSession.StateMachine

    @Test func framesCarryTheirCursor() {
        let event = ServerFrame.parse(
            #"{"type":"order_updated","id":4,"order_id":4,"event_id":12,"cursor":"12-0b7e55d1"}"#)
        #expect(
            event
                == .event(OrderEventFrame(kind: .updated, orderID: 4, eventID: 12, cursor: ResumeCursor("12-0b7e55d1")))
        )
        let connected = ServerFrame.parse(
            #"{"type":"connected","user_id":7,"groups":[],"event_id":9,"cursor":"9-9f3a61c2"}"#)
        #expect(
            connected
                == .connected(
                    ConnectedFrame(userID: 7, groups: [], newestEventID: 9, cursor: ResumeCursor("9-9f3a61c2"))))
        let old = ServerFrame.parse(#"{"type":"order_updated","id":4,"event_id":12}"#)
        #expect(old == .event(OrderEventFrame(kind: .updated, orderID: 4, eventID: 12)))
    }

    @Test func resetContinuesFromTheConnectedFrameNotTheOldCursor() {
        var machine = Machine(policy: .standard, lastEventID: 500)
        _ = machine.start()
        // A restored database: the server's newest id is far below ours.
        _ = machine.received(
            .connected(ConnectedFrame(userID: 7, groups: [], newestEventID: 40, cursor: ResumeCursor("40-x"))))
        #expect(machine.received(.reset) == .refreshEverything)
        #expect(machine.lastEventID == 40)
        #expect(machine.lastCursor == ResumeCursor("40-x"))
        let live = OrderEventFrame(kind: .updated, orderID: 3, eventID: 41, cursor: ResumeCursor("41-y"))
        #expect(machine.received(.event(live)) == .orderChanged(live))
        #expect(machine.lastCursor == ResumeCursor("41-y"))
    }

    /// A pong comes after the replay: the resume point moves on to the `connected` frame's newest
    /// event, so a cursor does not age past the server's retention while nothing happens to this
    /// driver's orders (its next resume would get a needless `reset`). Never backwards, never
    /// before the pong (replayed events below it are still on their way), never without a cursor.
    @Test func aPongMovesTheResumePointToTheConnectedFramesNewest() {
        var machine = Machine(policy: .standard, lastEventID: 500, lastCursor: ResumeCursor("500-a"))
        _ = machine.start()
        _ = machine.received(
            .connected(ConnectedFrame(userID: 7, groups: [], newestEventID: 9_000, cursor: ResumeCursor("9000-b"))))
        #expect(machine.lastCursor == ResumeCursor("500-a"), "not before the replay is in")
        let replayed = OrderEventFrame(kind: .updated, orderID: 3, eventID: 700, cursor: ResumeCursor("700-c"))
        #expect(machine.received(.event(replayed)) == .orderChanged(replayed))
        _ = machine.received(.pong)
        #expect(machine.lastEventID == 9_000 && machine.lastCursor == ResumeCursor("9000-b"))
        let live = OrderEventFrame(kind: .updated, orderID: 3, eventID: 9_001, cursor: ResumeCursor("9001-d"))
        #expect(machine.received(.event(live)) == .orderChanged(live))

        var ahead = Machine(policy: .standard, lastEventID: 500, lastCursor: ResumeCursor("500-a"))
        _ = ahead.start()
        _ = ahead.received(.connected(ConnectedFrame(userID: 7, groups: [], newestEventID: 400, cursor: ResumeCursor("400-e"))))
        _ = ahead.received(.pong)
        #expect(ahead.lastCursor == ResumeCursor("500-a"), "never backwards (a rewind is the reset's to tell)")

        var old = Machine(policy: .standard, lastEventID: 500, lastCursor: ResumeCursor("500-a"))
        _ = old.start()
        _ = old.received(.connected(ConnectedFrame(userID: 7, groups: [], newestEventID: 9_000)))
        _ = old.received(.pong)
        #expect(old.lastEventID == 500 && old.lastCursor == ResumeCursor("500-a"), "a server without cursors")
    }

    /// A pong that names the server's position moves the resume point there, past the `connected`
    /// frame's: a socket up for days without the driver's own events keeps a fresh cursor.
    @Test func aPongThatNamesThePositionMovesTheResumePointThere() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(
            .connected(ConnectedFrame(userID: 7, groups: [], newestEventID: 100, cursor: ResumeCursor("100-a"))))
        #expect(machine.lastCursor == ResumeCursor("100-a"))
        _ = machine.received(.pong, position: ServerFrame.Position(eventID: 9_000, cursor: ResumeCursor("9000-b")))
        #expect(machine.lastEventID == 9_000 && machine.lastCursor == ResumeCursor("9000-b"))
        _ = machine.received(.pong, position: ServerFrame.Position(eventID: 50, cursor: ResumeCursor("50-c")))
        #expect(machine.lastCursor == ResumeCursor("9000-b"), "never backwards")
    }

    /// The session hands a pong's position to the machine: the next socket resumes from it.
    @Test func aSessionResumesFromWhereItsLastPongSaidItWas() async throws {
        let h = await Harness.live()
        h.transport.current?.receive(#"{"type":"pong","event_id":500,"cursor":"500-0b7e55d1"}"#)
        await eventually("position taken") { await h.session.lastCursor == ResumeCursor("500-0b7e55d1") }
        h.api.resetCounts()
        await h.drop(code: 1012)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        #expect(h.transport.current?.request.queryValue("cursor") == "500-0b7e55d1")
    }

    @Test func reconnectResumesWithTheLastCursorSeen() async throws {
        let h = await Harness.live()
        await h.receiveEvents([(order: 2, eventID: 11), (order: 3, eventID: 12)])
        #expect(await h.session.lastCursor == ResumeCursor(FakeConnection.cursor(12)))
        h.api.resetCounts()
        await h.drop(code: 1012)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        #expect(h.api.socketCursors == [ResumeCursor(FakeConnection.cursor(12))])
        #expect(h.transport.current?.request.queryValue("cursor") == FakeConnection.cursor(12))
        // `since` goes along for servers that predate cursors.
        #expect(h.transport.current?.request.queryValue("since") == "12")
    }

    @Test func anEventWithoutACursorFallsBackToSince() async throws {
        let h = await Harness.live()
        h.transport.current?.receiveEvent(order: 2, eventID: 11)
        h.transport.current?.receiveEvent(order: 3, eventID: 12, epoch: nil)  // an older node sent this one
        await eventually("event 12 read") { await h.session.lastEventID == 12 }
        h.api.resetCounts()
        await h.drop(code: 1001)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        #expect(h.api.socketCursors == [nil])  // not the stale cursor of event 11
        #expect(h.transport.current?.request.queryValue("cursor") == nil)
        #expect(h.transport.current?.request.queryValue("since") == "12")
    }

    /// The bug this fixes: after a reset the session kept its old cursor and dropped every live event
    /// with a lower id — after a database restore, every event until the ids caught up.
    @Test func afterAResetLiveEventsWithLowerIdsAreApplied() async throws {
        let h = await Harness.live()
        try await h.open(2)
        await h.receiveEvents([(order: 2, eventID: 11), (order: 3, eventID: 12)])
        await h.clock.advance(by: .milliseconds(250))
        await h.waitUntilIdle()
        await h.drop(code: 1012)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        // The server was restored from a backup: its newest event is 5, with another history.
        h.transport.current?.receiveConnected(newest: 5, epoch: 1)
        h.transport.current?.receive(#"{"type":"reset"}"#)
        await eventually("continues from the server's newest") { await h.session.lastEventID == 5 }
        #expect(await h.session.lastCursor == ResumeCursor(FakeConnection.cursor(5, epoch: 1)))
        await h.clock.advance(by: .milliseconds(250))
        await h.waitUntilIdle()
        h.api.resetCounts()
        let revision = await h.session.listRevision
        h.api.touch(2)
        h.transport.current?.receiveEvent(order: 2, eventID: 6, epoch: 1)
        await eventually("live event 6 applied") { await h.session.lastEventID == 6 }
        await h.clock.advance(by: .milliseconds(250))
        await eventually("list and detail refetched") { h.api.listFetches == 1 && h.api.detailRequests == [2] }
        #expect(await h.session.listRevision == revision + 1)
        await eventually("detail current") { await h.session.cachedDetail(2)?.version == 2 }
    }
}
