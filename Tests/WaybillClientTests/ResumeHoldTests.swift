import Foundation
import Testing
import WaybillTesting

@testable import WaybillClient

/// The offline queue across a resume (docs/PROTOCOL.md, "Resume"): after a restore or a failover
/// that lost commits, versions repeat with other content, so an action queued with `If-Match` for a
/// version seen before could match a version the driver never saw. The queue waits, on a socket
/// that resumes, until the server's pong (answered after the replay) or its `reset`; on `reset`,
/// actions that name a version are refused for the driver to check the order again.
@Suite(.timeLimit(.minutes(1)))
struct ResumeHoldTests {
    /// Sockets come back after 1 s; a failed action waits 300 s, so only the socket can let it go.
    static let configuration = DriverSession.Configuration(
        reconnectPolicy: ReconnectPolicy(base: .seconds(1), cap: .seconds(1), jitter: .none),
        actionPolicy: ActionQueuePolicy(retry: ReconnectPolicy(base: .seconds(300), cap: .seconds(300), jitter: .none)),
        resumeCheckLimit: .seconds(10))

    /// A live session with order 1 opened, an accept for it queued with `If-Match` (its first send
    /// failed: offline), and a stage of order 2 queued behind it without a precondition; then the
    /// socket drops and a new one connects, resuming, to a server that does not answer pings by
    /// itself. Returns the harness, the two actions and the new socket, `connected` received.
    static func resumedWithQueue() async throws -> (Harness, QueuedAction, QueuedAction, FakeConnection) {
        let h = await Harness.live(configuration: configuration)
        try await h.open(1)
        h.api.failWrites([.unreachable("offline")])
        let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await eventually("first attempt") { let sending = await h.session.isSendingAction; return h.api.writeKeys.count == 1 && !sending }
        let stage = try await h.session.queue(.completeStage(5, of: 2), expecting: .any)
        #expect(accept.ifMatch == FakeOrdersAPI.etag(1, version: 1))
        let socket = try await h.dropAndResume()
        return (h, accept, stage, socket)
    }

    @Test func queuedActionsWaitForThePongThatFollowsTheReplay() async throws {
        let (h, accept, stage, socket) = try await Self.resumedWithQueue()
        #expect(await h.session.connectionState == .live)
        #expect(h.api.writeKeys == [accept.id.rawValue], "nothing sent while a reset may still come")
        socket.receive(#"{"type":"pong"}"#)
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 2 5"])
        #expect(h.api.appliedWriteKeys == [accept.id.rawValue, stage.id.rawValue])
        #expect(await h.session.refusedActions.isEmpty)
    }

    /// Also the one without a precondition: the restore that made the `reset` brought the id
    /// counter back, so order 2 may now be an order the driver never saw.
    @Test func onResetEveryQueuedActionIsRefused() async throws {
        let (h, accept, stage, socket) = try await Self.resumedWithQueue()
        socket.receive(#"{"type":"reset"}"#)
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites.isEmpty, "nothing from before the reset is sent")
        let refused = await h.session.refusedActions
        #expect(refused.map(\.id) == [accept.id, stage.id])
        guard case .refused(let reason) = refused.first?.state, case .refused(let second) = refused.last?.state else {
            Issue.record("not refused: \(refused.map(\.state))")
            return
        }
        // The accept was tried once without an answer (offline cannot be told from a lost answer):
        // it may have been applied, so "check the order", not "do this again".
        #expect(reason.code == "unconfirmed")
        #expect(second.code == "history_rewound")
        // Kept in the storage too, as every refusal is, until the driver dismisses it.
        let data = try #require(try h.storage.load())
        let stored = try StoredActionQueue.read(data)
        #expect(stored.refused.map(\.id) == [accept.id, stage.id])
        #expect(stored.actions.isEmpty)
    }

    @Test func anEventSettlesTheResumeAsThePongDoes() async throws {
        let (h, _, _, socket) = try await Self.resumedWithQueue()
        socket.receiveEvent(order: 3, eventID: 12)
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 2 5"])
    }

    /// A ticket request the server answers with "wait" (429 past the user's rate, 503 in a store
    /// outage) is not a socket a proxy refused: however often it comes while REST calls answer, the
    /// queue stays held for the resume's outcome (two upgrades failing so used to let it go).
    @Test(arguments: [429, 503]) func ticketRequestsAnsweredWaitDoNotEndTheHold(status: Int) async throws {
        let (h, accept, stage, socket) = try await Self.resumedWithQueue()
        h.api.setSocketError(.http(status: status, code: status == 429 ? "rate_limited" : "store_unavailable", message: "wait"))
        socket.drop(code: 1006)
        for round in 1...3 {
            await h.waitForBackoff()
            let fetches = h.api.listFetches
            await h.session.refresh()  // REST answers while the socket cannot open
            await eventually("list fetched, round \(round)") { h.api.listFetches > fetches }
            await h.clock.advance(by: .seconds(1))
            await eventually("ticket asked, round \(round)") { h.api.socketRequests.count >= 2 + round }
        }
        await h.waitForBackoff()
        await h.settle()
        #expect(h.api.writeKeys == [accept.id.rawValue], "nothing sent while a reset may still come")
        h.api.setSocketError(nil)
        await h.clock.advance(by: .seconds(1))
        await eventually("connected again") { h.transport.connections.count >= 3 }
        let again = try #require(h.transport.current)
        again.receive(#"{"type":"reset"}"#)
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(await h.session.refusedActions.map(\.id) == [accept.id, stage.id], "the reset still refuses what was queued")
    }

    /// An older server answers pings before its replay; a replay may be slow: the wait is bounded.
    @Test func withoutAnOutcomeTheQueueGoesAfterTheLimit() async throws {
        let (h, accept, _, _) = try await Self.resumedWithQueue()
        await h.clock.advance(by: .seconds(9))
        #expect(h.api.writeKeys == [accept.id.rawValue])
        await h.clock.advance(by: .seconds(1))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 2 5"])
    }

    /// A new session over a stored queue resumes from the cursor of its newest action (ids from
    /// before and after an earlier `reset` do not compare, so not the highest id).
    @Test func aNewSessionResumesFromItsNewestActionsCursor() async throws {
        let storage = InMemoryActionStorage()
        let older = QueuedAction(
            id: ActionID(rawValue: "a"), action: .completeStage(5, of: 2), ifMatch: nil,
            queuedAt: Date(timeIntervalSince1970: 1_800_000_000), seenEventID: 50, seenCursor: ResumeCursor("50-e0"))
        let newer = QueuedAction(
            id: ActionID(rawValue: "b"), action: .changeStatus(of: 1, to: .accepted), ifMatch: FakeOrdersAPI.etag(1, version: 1),
            queuedAt: Date(timeIntervalSince1970: 1_800_000_001), seenEventID: 12, seenCursor: ResumeCursor("12-e1"))
        try storage.save(StoredActionQueue.encode([older, newer]))
        let h = Harness(configuration: Self.configuration, storage: storage)
        await h.session.start()
        await h.waitForConnections(1)
        #expect(h.api.socketRequests == [12])
        #expect(h.api.socketCursors == [ResumeCursor("12-e1")])
        #expect(await h.session.connectionState == .connecting(attempt: 0))
    }

    /// The stored queue could not be read when the app started (a phone still locked), so the
    /// session started without a cursor; when it is read, the session connects again from the
    /// queue's cursor and its actions wait for that resume's outcome like any other.
    @Test func aQueueReadLateIsCheckedAgainstItsHistoryToo() async throws {
        let first = await Harness.live(configuration: Self.configuration)
        try await first.open(1)
        first.api.failWrites([.unreachable("offline")])
        let accept = try await first.session.queue(.changeStatus(of: 1, to: .accepted))
        await eventually("first attempt") { let sending = await first.session.isSendingAction; return first.api.writeKeys.count == 1 && !sending }
        await first.session.stop()

        var configuration = Self.configuration
        configuration.heartbeatInterval = nil
        let transport = FakeEventTransport()
        let locked = LockedStorage(first.storage, failingLoads: .max)
        let session = DriverSession(
            api: first.api, transport: transport, clock: first.clock, configuration: configuration,
            actionStorage: locked, wallClock: Harness.wallClock(first.clock))
        await session.start()
        await eventually("connected") { transport.connections.count == 1 }
        #expect(first.api.socketCursors.last == .some(nil), "nothing to resume from yet")
        transport.current?.receiveConnected(newest: 20)
        await eventually("live") { await session.connectionState == .live }
        locked.unlock()
        await session.appDidBecomeActive()  // unlocked now: the queue is read
        #expect(await session.pendingActions.map(\.id) == [accept.id])
        await eventually("connected again") { transport.connections.count == 2 }
        #expect(first.api.socketCursors.last == ResumeCursor(FakeConnection.cursor(10)), "from the queue's history")
        let socket = try #require(transport.current)
        socket.goSilent()
        socket.receiveConnected(newest: 20)
        await first.clock.settle()
        #expect(first.api.writeKeys == [accept.id.rawValue], "held")
        socket.receive(#"{"type":"reset"}"#)
        await eventually("refused") { await !session.refusedActions.isEmpty }
        #expect(await session.refusedActions.map(\.id) == [accept.id])
        #expect(first.api.appliedWrites.isEmpty)
        await session.stop()
    }

    /// A first connect has no cursor, so no `reset` can come: actions go as soon as it is live.
    @Test func aFirstConnectDoesNotHoldTheQueue() async throws {
        let h = Harness(configuration: Self.configuration)
        let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await h.session.start()
        await h.waitForConnections(1)
        h.transport.current?.goSilent()
        h.transport.current?.receiveConnected()
        await eventually("sent") { h.api.appliedWriteKeys == [accept.id.rawValue] }
        #expect(h.transport.current?.sent.contains(#"{"type":"ping"}"#) == false, "no probe without a resume")
    }
}
