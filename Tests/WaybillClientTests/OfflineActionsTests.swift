import Foundation
import Synchronization
import Testing
#if canImport(Glibc)
    import Glibc
#endif
import WaybillTesting

@testable import WaybillClient

/// SPEC §5 rule 8 through a session on a virtual clock: queued, persisted, sent in order, applied once.
@Suite(.timeLimit(.minutes(1)))
struct OfflineActionsTests {
    /// A policy without jitter, so the test knows each delay: 1 s, 2 s, 4 s, … capped at 8 s.
    static let configuration = DriverSession.Configuration(
        actionPolicy: ActionQueuePolicy(
            retry: ReconnectPolicy(base: .seconds(1), cap: .seconds(8), jitter: .none), maxAge: .seconds(10_000_000)))

    /// Moves virtual time on, a second at a time, until the queue is empty.
    func advanceUntilSent(_ h: Harness, sourceLocation: SourceLocation = #_sourceLocation) async {
        for _ in 0..<120 {
            await eventually("no send in flight", sourceLocation: sourceLocation) { await !h.session.isSendingAction }
            if await h.session.pendingActions.isEmpty { return }
            await h.clock.advance(by: .seconds(1))
        }
        Issue.record("queue not sent", sourceLocation: sourceLocation)
    }

    /// Waits until `count` write attempts reached the fake API and the session has taken the last answer.
    func waitForAttempts(_ h: Harness, _ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("\(count) write attempts", sourceLocation: sourceLocation) {
            let sending = await h.session.isSendingAction
            return h.api.writeKeys.count >= count && !sending
        }
    }

    @Test func actionsMadeOfflineWaitThenGoOutInOrderEachAppliedOnce() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        h.api.failWrites([.unreachable("offline")])
        let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        let stage = try await h.session.queue(.completeStage(5, of: 1))
        let document = try await h.session.queue(.attachDocument(name: "POD.pdf", kind: "proof_of_delivery", to: 2))
        await waitForAttempts(h, 1)
        // Shown at once as pending, per order; the list itself is still the server's.
        #expect(await h.session.pendingActions.map(\.id) == [accept.id, stage.id, document.id])
        #expect(await h.session.pendingActions(for: 1).map(\.action) == [accept.action, stage.action])
        #expect(await h.session.pendingActions.allSatisfy { $0.state == .waiting })
        #expect(await h.session.orders.first { $0.id == 1 }?.status == .assigned)
        #expect(h.api.appliedWrites.isEmpty)

        await h.clock.advance(by: .seconds(1))  // the first retry
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 1 5", "document 2 POD.pdf"])
        #expect(h.api.appliedWriteKeys == [accept.id.rawValue, stage.id.rawValue, document.id.rawValue])
        #expect(Set([accept.id, stage.id, document.id]).count == 3, "each action has its own key")
        #expect(h.api.writeKeys == [accept.id.rawValue] + h.api.appliedWriteKeys, "the failed attempt's key is reused")
    }

    @Test func aNewSessionOnTheSameStorageResumesTheQueue() async throws {
        let first = await Harness.live(configuration: Self.configuration)
        first.api.failWrites(Array(repeating: .unreachable("offline"), count: 3))
        let accept = try await first.session.queue(.changeStatus(of: 2, to: .accepted))
        let stage = try await first.session.queue(.completeStage(7, of: 2))
        await waitForAttempts(first, 1)
        await first.session.stop()  // the app is killed while offline

        let restarted = Harness(
            configuration: Self.configuration, api: first.api, storage: first.storage, clock: first.clock, seed: 99)
        #expect(await restarted.session.pendingActions.map(\.id) == [accept.id, stage.id])
        #expect(await restarted.session.pendingActions.map(\.action) == [accept.action, stage.action])
        await restarted.session.start()
        // It resumes from the cursor stored with the actions: they wait for the socket to show the
        // server's history is the same (here its pong: no `reset`).
        await restarted.waitForConnections(1)
        #expect(restarted.api.socketCursors.last == ResumeCursor(FakeConnection.cursor(10)), "resumed from the stored cursor")
        restarted.transport.current?.receiveConnected(newest: 10)
        await advanceUntilSent(restarted)  // two more failures, then both go through
        #expect(restarted.api.appliedWrites == ["status 2 accepted", "stage 2 7"])
        #expect(restarted.api.appliedWriteKeys == [accept.id.rawValue, stage.id.rawValue])
        // What is stored follows: nothing left for a third launch.
        let third = Harness(api: first.api, storage: first.storage, clock: first.clock, seed: 7)
        #expect(await third.session.pendingActions.isEmpty)
    }

    /// The app is killed while a request is on its way: the next launch sends it again with the same key,
    /// and the server, which got the first one after all, applies it once.
    @Test func aSendCutShortByAnExitIsResentWithItsKeyAndAppliedOnce() async throws {
        let first = await Harness.live(configuration: Self.configuration)
        first.api.holdWrites(true)
        let accept = try await first.session.queue(.changeStatus(of: 1, to: .accepted))
        await eventually("request on its way") { first.api.heldWriteCount == 1 }
        await first.session.stop()
        first.api.holdWrites(false)
        first.api.releaseWrites()  // the first request reaches the server after all
        await eventually("first applied") { first.api.appliedWrites.count == 1 }

        let restarted = await Harness.live(
            configuration: Self.configuration, api: first.api, storage: first.storage, clock: first.clock, seed: 5)
        await advanceUntilSent(restarted)
        #expect(restarted.api.writeKeys == [accept.id.rawValue, accept.id.rawValue])
        #expect(restarted.api.appliedWrites == ["status 1 accepted"])
        #expect(await restarted.session.refusedActions.isEmpty)
    }

    @Test func aRefusedActionIsDroppedReportedAndTheNextOneStillGoes() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        let updates = await h.session.updates()
        h.api.refuseWrites(to: 2)
        let refused = try await h.session.queue(.changeStatus(of: 2, to: .accepted))
        let next = try await h.session.queue(.changeStatus(of: 3, to: .accepted))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 3 accepted"])
        let dropped = await h.session.refusedActions
        #expect(dropped.map(\.id) == [refused.id])
        #expect(
            dropped.first?.state
                == .refused(ActionRefusal(status: 409, code: "invalid_transition", message: "order is cancelled")))
        var states: [ActionID: [String]] = [:]
        for await update in updates {
            guard case .action(let action) = update else { continue }
            states[action.id, default: []].append(Self.name(action.state))
            if states[next.id]?.last == "applied" { break }
        }
        #expect(states[refused.id] == ["waiting", "sending", "refused"])
        #expect(states[next.id] == ["waiting", "sending", "applied"])
        await h.session.dismissRefusal(refused.id)
        #expect(await h.session.refusedActions.isEmpty)
    }

    /// The app is killed after a refusal in the background: the next session still shows it,
    /// with its reason, until the driver dismisses it (found by a review, 2026-12-04).
    @Test func aRefusalSurvivesARestartUntilItIsDismissed() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        h.api.refuseWrites(to: 2)
        let refused = try await h.session.queue(.changeStatus(of: 2, to: .accepted))
        await eventually("refused") { await !h.session.refusedActions.isEmpty }
        let restarted = DriverSession(
            api: h.api, transport: FakeEventTransport(), clock: h.clock, random: SeededGenerator(seed: 2),
            actionStorage: h.storage, wallClock: Harness.wallClock(h.clock))
        let kept = await restarted.refusedActions
        #expect(kept.map(\.id) == [refused.id])
        #expect(kept.first?.state == .refused(ActionRefusal(status: 409, code: "invalid_transition", message: "order is cancelled")))
        #expect(await restarted.pendingActions.isEmpty, "refused, not queued again")
        await restarted.dismissRefusal(refused.id)
        let again = DriverSession(api: h.api, transport: FakeEventTransport(), clock: h.clock, actionStorage: h.storage)
        #expect(await again.refusedActions.isEmpty)
    }

    @Test func anActionForAVersionThatChangedMeanwhileIsRefusedWith412() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        try await h.open(1)
        h.api.touch(1, status: .assigned)  // the dispatcher edits it before the driver's action gets through
        try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await eventually("refused") { await !h.session.refusedActions.isEmpty }
        #expect(await h.session.refusedActions.first.map { Self.name($0.state) } == "refused")
        #expect(h.api.writeIfMatches == [FakeOrdersAPI.etag(1, version: 1)])
        #expect(h.api.appliedWrites.isEmpty)
    }

    /// The server applied the write but its answer never arrived: the retry carries the same key, the
    /// server answers with the stored response, and the order changed once.
    @Test func aRetryAfterALostResponseUsesTheSameKeyAndAppliesOnce() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        h.api.loseResponses(1)
        let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await waitForAttempts(h, 1)
        #expect(await h.session.pendingActions.map(\.id) == [accept.id], "the client cannot know it was applied")
        await h.clock.advance(by: .seconds(1))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.writeKeys == [accept.id.rawValue, accept.id.rawValue])
        #expect(h.api.appliedWrites == ["status 1 accepted"])
        #expect(h.api.state.withLock { $0.details[1]?.version } == 2)
        #expect(await h.session.refusedActions.isEmpty)
    }

    /// The server applied the write, but its answer came back unreadable (a proxy that mangled the
    /// body; every retry would replay the same answer): the action is applied, not retried toward
    /// `gave_up`; the driver's next action on the order names the version it made, and the order
    /// is fetched to be shown. With and without the answer's `ETag`.
    @Test(arguments: [true, false])
    func anAppliedActionWhoseAnswerIsUnreadableIsAppliedAndTheOrderFetched(keepETag: Bool) async throws {
        let h = await Harness.live(configuration: Self.configuration)
        try await h.open(1)
        let updates = await h.session.updates()
        let fetchesBefore = h.api.state.withLock { $0.detailRequests.count }
        h.api.garbleResponses(1, keepETag: keepETag)
        h.api.holdWrites(true)
        let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        let stage = try await h.session.queue(.completeStage(5, of: 1))
        await eventually("accept sent") { h.api.heldWriteCount == 1 }
        h.api.holdWrites(false)
        h.api.releaseWrites()
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 1 5"], "each once")
        #expect(h.api.writeKeys == [accept.id.rawValue, stage.id.rawValue], "none retried")
        // The answer's ETag when it had one (the fake's carries a check, as the server's does), else
        // the bare next version.
        let expected = keepETag ? FakeOrdersAPI.garbledETag(1, version: 2) : #""o1-v2""#
        #expect(h.api.writeIfMatches == [FakeOrdersAPI.etag(1, version: 1), expected], "the stage follows the accept")
        #expect(await h.session.refusedActions.isEmpty)
        var states: [String] = []
        for await update in updates {
            guard case .action(let action) = update, action.id == accept.id else { continue }
            states.append(Self.name(action.state))
            if action.state == .applied { break }
        }
        #expect(states == ["waiting", "sending", "applied"])
        await h.clock.advance(by: .seconds(1))  // the refresh's coalescing window
        await eventually("the order fetched") {
            let fetched = h.api.state.withLock { $0.detailRequests.count } > fetchesBefore
            let shown = await h.session.cachedDetail(1)?.status
            return fetched && shown == .accepted
        }
    }

    /// A lone applied action with an unreadable answer: nothing else on the order would fetch it, and
    /// the driver must see what they did, at once (virtual time does not move here).
    @Test func aLoneActionWhoseAnswerIsUnreadableHasItsOrderFetched() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        try await h.open(2)
        let fetchesBefore = h.api.state.withLock { $0.detailRequests.filter { $0 == 2 }.count }
        h.api.garbleResponses(1, keepETag: true)
        try await h.session.queue(.changeStatus(of: 2, to: .accepted))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        // At once, not after the coalescing window: a tap meanwhile would name the old version.
        await eventually("the order fetched") {
            let fetched = h.api.state.withLock { $0.detailRequests.filter { $0 == 2 }.count } > fetchesBefore
            let shown = await h.session.cachedDetail(2)?.status
            return fetched && shown == .accepted
        }
    }

    /// The same for a direct write: it succeeded, so it does not throw; the opened order is fetched.
    @Test func aDirectWriteWhoseAnswerIsUnreadableSucceedsAndReloadsTheOrder() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        try await h.open(1)
        h.api.garbleResponses(1, keepETag: false)
        try await h.session.changeStatus(of: 1, to: .accepted)
        #expect(h.api.appliedWrites == ["status 1 accepted"])
        #expect(await h.session.cachedDetail(1)?.status == .accepted, "reloaded before returning")
    }

    @Test func anOpenedOrdersQueuedActionsFollowEachOthersVersions() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        try await h.open(1)
        h.api.failWrites([.http(status: 503, code: "store_unavailable", message: "down")])
        try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        try await h.session.queue(.completeStage(5, of: 1))
        await waitForAttempts(h, 1)
        await h.clock.advance(by: .seconds(1))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 1 5"])
        let v1 = FakeOrdersAPI.etag(1, version: 1), v2 = FakeOrdersAPI.etag(1, version: 2)
        #expect(h.api.writeIfMatches == [v1, v1, v2], "the stage names the version the accept created")
    }

    /// Every driver action names the order by its creation time (`If-Order-Created`) when the session
    /// knows it, so after a restore it cannot reach another order that took the id: from the row for an
    /// action on a row's version or any version, from the opened detail for the shown detail's. An
    /// order the session knows nothing of goes without it. `If-Match` is as before.
    @Test func anActionNamesTheOrderByItsCreationTimeBesideItsVersion() async throws {
        let api = FakeOrdersAPI()
        let created = Date(timeIntervalSince1970: 1_764_910_042.123), detailCreated = created.addingTimeInterval(5)
        api.state.withLock { state in
            state.rows[0].createdAt = created
            state.details[1]?.createdAt = created
            state.details[2]?.createdAt = detailCreated  // the row of 2 has none: the detail's is used
        }
        let h = await Harness.live(configuration: Self.configuration, api: api)
        await h.waitUntilIdle()
        try await h.session.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)
        try await h.session.queue(.completeStage(5, of: 1))  // not opened: no version, but the row's time
        try await h.session.queue(.changeStatus(of: 9, to: .accepted))  // not in the list
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.writeOrderCreated == [1_764_910_042_123, 1_764_910_042_123, nil])
        #expect(h.api.writeIfMatches == [nil, nil, nil])
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 1 5"])
        try await h.open(2)
        try await h.session.changeStatus(of: 2, to: .accepted)
        #expect(h.api.writeOrderCreated.last == 1_764_910_047_123, "the opened detail's")
        #expect(h.api.writeIfMatches.last == FakeOrdersAPI.etag(2, version: 1))
        // Another order took id 1 (a restore): the action is refused, not applied to it.
        api.state.withLock { $0.details[1]?.createdAt = created.addingTimeInterval(60) }
        let refused = try await h.session.queue(.completeStage(6, of: 1))
        await eventually("refused") { await h.session.refusedActions.contains { $0.id == refused.id } }
        #expect(h.api.appliedWrites.count == 3)
    }

    /// The creation time comes from what supplies the action's version: the opened detail for the shown
    /// detail's, the list's row for any version. Here another order took id 1 (a restore) and the list
    /// already shows it while the opened detail still shows the old one: an action on the detail is
    /// refused, one on the row applies to the order the row shows.
    @Test func theCreationTimeComesFromWhatTheActionActsOn() async throws {
        let api = FakeOrdersAPI()
        let old = Date(timeIntervalSince1970: 1_764_910_042.123), new = old.addingTimeInterval(60)
        api.state.withLock { state in
            state.rows[0].createdAt = old
            state.details[1]?.createdAt = old
        }
        let h = await Harness.live(configuration: Self.configuration, api: api)
        try await h.open(1)
        h.api.holdDetails(true)  // the opened detail is not fetched again meanwhile
        api.state.withLock { state in
            state.rows[0].createdAt = new
            state.details[1]?.createdAt = new
            state.dataRevision += 1
        }
        await h.session.refresh()
        await eventually("the list shows the other order") { await h.session.orders.first?.createdAt == new }
        let onDetail = try await h.session.queue(.completeStage(5, of: 1))
        try await h.session.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.writeOrderCreated == [1_764_910_042_123, 1_764_910_102_123])
        #expect(await h.session.refusedActions.map(\.id) == [onDetail.id])
        #expect(h.api.appliedWrites == ["status 1 accepted"])
        h.api.holdDetails(false)
        h.api.releaseDetails()
    }

    /// An action sent without If-Match (nothing was open when the driver tapped) still moves the
    /// driver's later actions that expect the version it changed: their own change must not refuse
    /// their next one with a 412.
    @Test func anActionWithoutIfMatchMovesTheNextOnesExpectedVersionToo() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        h.api.failWrites([.http(status: 503, code: "store_unavailable", message: "down")])
        try await h.session.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)
        let v1 = FakeOrdersAPI.etag(1, version: 1), v2 = FakeOrdersAPI.etag(1, version: 2)
        try await h.session.queue(.completeStage(5, of: 1), expecting: .etag(v1))  // opened meanwhile, at v1
        await waitForAttempts(h, 1)
        await h.clock.advance(by: .seconds(1))
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWrites == ["status 1 accepted", "stage 1 5"])
        #expect(h.api.writeIfMatches == [nil, nil, v2], "the stage follows the accept it came after")
        #expect(await h.session.refusedActions.isEmpty)
    }

    @Test func aSocketThatGoesLiveSendsAWaitingActionWithoutWaitingForItsBackoff() async throws {
        let slow = DriverSession.Configuration(
            reconnectPolicy: ReconnectPolicy(base: .seconds(1), cap: .seconds(1), jitter: .none),
            actionPolicy: ActionQueuePolicy(
                retry: ReconnectPolicy(base: .seconds(300), cap: .seconds(300), jitter: .none)))
        let h = await Harness.live(configuration: slow)
        h.api.failWrites([.unreachable("offline")])
        let accept = try await h.session.queue(.changeStatus(of: 3, to: .accepted))
        await waitForAttempts(h, 1)
        await h.drop(code: 1006)
        await h.clock.advance(by: .seconds(1))
        await h.waitForConnections(2)
        h.transport.current?.receiveConnected()
        await eventually("queue empty") { await h.session.pendingActions.isEmpty }
        #expect(h.api.appliedWriteKeys == [accept.id.rawValue])
        #expect(h.clock.now.offset < .seconds(300))
    }

    /// Every attempt answered "not now" (503: the store is down), past the age limit: dropped as
    /// `expired`, never sent a third time.
    @Test func anActionNotAppliedWithinTheMaximumAgeExpires() async throws {
        let config = DriverSession.Configuration(
            actionPolicy: ActionQueuePolicy(
                retry: ReconnectPolicy(base: .seconds(60), cap: .seconds(60), jitter: .none), maxAge: .seconds(90)))
        let h = await Harness.live(configuration: config)
        h.api.failWrites(Array(repeating: .http(status: 503, code: "store_unavailable", message: "down"), count: 5))
        try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await waitForAttempts(h, 1)
        await h.clock.advance(by: .seconds(60))
        await waitForAttempts(h, 2)
        await h.clock.advance(by: .seconds(60))
        await eventually("expired") { await !h.session.refusedActions.isEmpty }
        guard case .refused(let reason) = await h.session.refusedActions.first?.state else {
            Issue.record("not refused")
            return
        }
        #expect(reason.code == "expired")
        #expect(h.api.writeKeys.count == 2, "not sent a third time")
        #expect(await h.session.pendingActions.isEmpty)
    }

    /// Applied, but its answer was lost, and then offline until the age limit (a phone off
    /// overnight): the driver is told it may have been applied and to check the order, not that it
    /// was not sent (which made a driver attach a document twice), and the order is fetched.
    @Test func anActionSentWithoutAnAnswerThatExpiresIsReportedUnconfirmed() async throws {
        let config = DriverSession.Configuration(
            actionPolicy: ActionQueuePolicy(
                retry: ReconnectPolicy(base: .seconds(50), cap: .seconds(50), jitter: .none), maxAge: .seconds(90)))
        let h = await Harness.live(configuration: config)
        h.api.loseResponses(1)
        try await h.session.queue(.changeStatus(of: 1, to: .accepted))
        await waitForAttempts(h, 1)
        h.api.failWrites(Array(repeating: .unreachable("offline"), count: 5))
        await h.clock.advance(by: .seconds(50))
        await waitForAttempts(h, 2)
        let listsBefore = h.api.listFetches
        await h.clock.advance(by: .seconds(50))  // 100 s: past the age, before the 120 s poll
        await eventually("dropped") { await !h.session.refusedActions.isEmpty }
        guard case .refused(let reason) = await h.session.refusedActions.first?.state else {
            Issue.record("not refused")
            return
        }
        #expect(reason.code == "unconfirmed")
        #expect(reason.message.contains("may have been applied"))
        #expect(h.api.appliedWrites.count == 1)
        await h.clock.advance(by: .seconds(1))  // the fetch's coalescing window; the poll is at 120 s
        await eventually("the order fetched") { h.api.listFetches > listsBefore }
    }

    @Test func anActionThatCannotBeStoredIsNotAccepted() async throws {
        let h = await Harness.live(configuration: Self.configuration)
        h.storage.failSaves(true)
        await #expect(throws: (any Error).self) { try await h.session.queue(.changeStatus(of: 1, to: .accepted)) }
        #expect(await h.session.pendingActions.isEmpty)
        #expect(h.api.writeKeys.isEmpty)
    }

    @Test func theFileStorageKeepsTheQueueAcrossSessions() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let storage = FileActionStorage(url: directory.appendingPathComponent("state/actions.json"))
        let clock = TestClock()
        let api = FakeOrdersAPI()
        let first = DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, random: SeededGenerator(seed: 1),
            actionStorage: storage, wallClock: Harness.wallClock(clock))
        let queued = try await first.queue(.attachDocument(name: "CMR scan", kind: "cmr", to: 2))  // not started
        let second = DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, random: SeededGenerator(seed: 2),
            actionStorage: storage, wallClock: Harness.wallClock(clock))
        #expect(await second.pendingActions == [queued])
        #expect(await second.actionStorageUnreadable == false)
        try Data("not json".utf8).write(to: storage.url)
        let third = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: storage)
        #expect(await third.actionStorageUnreadable)
        #expect(await third.pendingActions.isEmpty)
        // The unreadable queue is kept aside: the next action does not overwrite it.
        try await third.queue(.completeStage(4, of: 2), expecting: .any)
        #expect(try Data(contentsOf: storage.unreadableURL) == Data("not json".utf8))
        #expect(try StoredActionQueue.decode(Data(contentsOf: storage.url)).count == 1)
    }

    /// Each save replaces the file whole through a synced temporary file (nothing else is left in the
    /// directory, and the file is the owner's only); a save that cannot be made leaves the old queue.
    /// Unreadable files set aside are never replaced by later ones.
    @Test func theFileStorageReplacesWholeAndKeepsEveryUnreadableFile() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer {
            chmod(directory.path, 0o700)
            try? FileManager.default.removeItem(at: directory)
        }
        let storage = FileActionStorage(url: directory.appendingPathComponent("actions.json"))
        try storage.save(Data("one".utf8))
        try storage.save(Data("two".utf8))
        #expect(try storage.load() == Data("two".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["actions.json"])
        let mode = try FileManager.default.attributesOfItem(atPath: storage.url.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        if getuid() != 0 {  // root writes anywhere
            chmod(directory.path, 0o500)
            #expect(throws: (any Error).self) { try storage.save(Data("three".utf8)) }
            chmod(directory.path, 0o700)
            #expect(try storage.load() == Data("two".utf8))
        }
        try storage.setAsideUnreadable()
        try storage.save(Data("also unreadable".utf8))
        try storage.setAsideUnreadable()
        #expect(try Data(contentsOf: storage.unreadableURL) == Data("two".utf8))
        #expect(try Data(contentsOf: storage.unreadableURL.appendingPathExtension("1")) == Data("also unreadable".utf8))
        #expect(try storage.load() == nil)
    }

    /// An unreadable queue that cannot be set aside (a read-only directory, a full disk) is never
    /// written over: the session does not take a new action (found by a review: the failure was
    /// ignored and the next action replaced the file).
    @Test func anUnreadableQueueThatCannotBeSetAsideIsNeverWrittenOver() async throws {
        let storage = UnmovableStorage(holding: Data("not json".utf8))
        let session = DriverSession(
            api: FakeOrdersAPI(), transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage)
        #expect(await session.actionStorageUnreadable)
        await #expect(throws: (any Error).self) { try await session.queue(.completeStage(4, of: 2), expecting: .any) }
        #expect(await session.pendingActions.isEmpty)
        #expect(storage.stored == Data("not json".utf8))
    }

    /// One user per queue file: a second `FileActionStorage` of the same file (in this process, as
    /// in another) is refused while the first is claimed, and so is a copy of the claimed value (it
    /// shared the claim: two sessions over copies wrote over each other); the file is free again
    /// once the claim is gone, whoever holds a reference to it.
    @Test func aQueueFileHasOneUserAtATime() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let first = FileActionStorage(url: url), copy = first
        var claim = try first.claim()
        #expect(claim != nil)
        #expect(throws: ActionStorageInUse.self) { _ = try copy.claim() }
        #expect(throws: ActionStorageInUse.self) { _ = try first.claim() }
        #expect(throws: ActionStorageInUse.self) { _ = try FileActionStorage(url: url).claim() }
        var shared = claim
        claim = nil
        #expect(throws: ActionStorageInUse.self) { _ = try FileActionStorage(url: url).claim() }
        shared = nil
        #expect(try copy.claim() != nil, "free once the claim is gone")
        withExtendedLifetime(shared) {}
    }

    /// Two sessions made over copies of one `FileActionStorage` value never write over each other's
    /// actions, as two over two values do (`twoSessionsOverOneFileNeverWriteOverEachOther`): the
    /// copies shared one claim, so both ran holding the file and each wrote its own queue over it.
    @Test func twoSessionsOverCopiesOfOneStorageNeverWriteOverEachOther() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let clock = TestClock(), api = FakeOrdersAPI(), storage = FileActionStorage(url: url)
        api.holdWrites(true)
        defer {
            api.holdWrites(false)
            api.releaseWrites()
        }
        let first = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: storage)
        let second = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: storage)
        await first.start()  // runs: holds the file
        let a = try await first.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)
        await second.start()
        await #expect(throws: ActionStorageInUse.self) { try await second.queue(.completeStage(5, of: 2), expecting: .any) }
        #expect(await second.pendingActions.isEmpty)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [a.id])
        await first.stop()
        let b = try await second.queue(.completeStage(5, of: 2), expecting: .any)  // free now: read, then kept
        #expect(await second.pendingActions.map(\.id) == [a.id, b.id])
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [a.id, b.id])
        await second.stop()
    }

    /// A session given its caller's claim (`waybill driver` claims the file before it logs in, to
    /// refuse a second instance at once) reads and keeps actions under it, and lets nobody else in:
    /// a second session given the same claim ignores it (two live sessions would write over each
    /// other's queue) and keeps no action.
    @Test func aSessionUsesTheClaimItsCallerHolds() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let storage = FileActionStorage(url: url)
        let earlier = DriverSession(api: FakeOrdersAPI(), transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage)
        let left = try await earlier.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)  // an earlier run's action
        let claim = try storage.claim()
        let api = FakeOrdersAPI()
        api.holdWrites(true)
        defer {
            api.holdWrites(false)
            api.releaseWrites()
        }
        let session = DriverSession(
            api: api, transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage, actionStorageClaim: claim)
        #expect(await session.pendingActions.map(\.id) == [left.id], "read under the caller's claim")
        await session.start()
        let kept = try await session.queue(.completeStage(4, of: 2), expecting: .any)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [left.id, kept.id])
        #expect(throws: ActionStorageInUse.self) { _ = try FileActionStorage(url: url).claim() }
        let other = DriverSession(
            api: api, transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage, actionStorageClaim: claim)
        await other.start()
        await #expect(throws: ActionStorageInUse.self) { try await other.queue(.completeStage(5, of: 2), expecting: .any) }
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [left.id, kept.id])
        await other.stop()
        await session.stop()
        #expect(throws: ActionStorageInUse.self) { _ = try FileActionStorage(url: url).claim() }  // still the caller's
        // Stopped (a 4001, a logout), the session gives the claim back: the app's next session takes
        // it, while the stopped one is still referenced (a review: it refused every action).
        let next = DriverSession(
            api: api, transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage, actionStorageClaim: claim)
        let later = try await next.queue(.completeStage(6, of: 2), expecting: .any)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [left.id, kept.id, later.id])
        await #expect(throws: ActionStorageInUse.self) { try await session.queue(.completeStage(7, of: 2), expecting: .any) }
        withExtendedLifetime((claim, session)) {}
    }

    /// Stopped and started again (SwiftUI's `.task` as its view goes and comes back), a session given
    /// its caller's claim takes the claim back: it sends the queue it had and keeps new actions (a
    /// review, 2026-12-07: from its first stop on it refused both, for as long as the app ran). Not
    /// when the app's next session adopted the claim meanwhile: that one keeps it.
    @Test func aSessionStartedAgainTakesBackItsCallersClaim() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let storage = FileActionStorage(url: url)
        let claim = try storage.claim()
        let api = FakeOrdersAPI(orders: [1, 2, 3])
        let clock = TestClock()
        let session = DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, configuration: Self.configuration,
            actionStorage: storage, actionStorageClaim: claim)
        api.failWrites([.unreachable("offline")])
        await session.start()
        let accept = try await session.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)
        await eventually("the first attempt failed") {
            let sending = await session.isSendingAction
            return api.writeKeys.count == 1 && !sending
        }
        await session.stop()
        await session.start()
        let stage = try await session.queue(.completeStage(4, of: 2), expecting: .any)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [accept.id, stage.id])
        for _ in 0..<30 where await !session.pendingActions.isEmpty {
            await clock.advance(by: .seconds(1))
            await eventually("no send in flight") { await !session.isSendingAction }
        }
        #expect(await session.pendingActions.isEmpty, "the queue went out")
        #expect(api.appliedWrites == ["status 1 accepted", "stage 2 4"])
        #expect(throws: ActionStorageInUse.self) { _ = try FileActionStorage(url: url).claim() }  // still the caller's
        // Stopped again, and the app's next session adopts the claim: started again, the first one
        // keeps no action (the next one's queue would be written over).
        await session.stop()
        let next = DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, actionStorage: storage, actionStorageClaim: claim)
        await session.start()
        await #expect(throws: ActionStorageInUse.self) { try await session.queue(.completeStage(5, of: 2), expecting: .any) }
        let later = try await next.queue(.completeStage(6, of: 2), expecting: .any)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [later.id])
        await session.stop()
        withExtendedLifetime((claim, next)) {}
    }

    /// A stopped session keeps no hold on its caller's claim: once the app lets the claim go, the
    /// file is free, though the stopped session is still referenced (a claim locks the file until
    /// it is freed; a review, 2026-12-07).
    @Test func aStoppedSessionDoesNotKeepItsCallersClaimAlive() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let storage = FileActionStorage(url: url)
        var claim = try storage.claim()
        let session = DriverSession(
            api: FakeOrdersAPI(), transport: FakeEventTransport(), clock: TestClock(), actionStorage: storage,
            actionStorageClaim: claim)
        await session.start()
        await session.stop()
        claim = nil
        let again = try FileActionStorage(url: url).claim()
        #expect(again != nil)
        withExtendedLifetime((session, again)) {}
    }

    /// Two sessions over one queue file (the app made a new one without releasing the old) never
    /// write over each other's actions (each writes its whole queue; found by a review): a session
    /// that runs holds the file, and the other keeps no action meanwhile; one that does not run
    /// holds it only for a write, after reading what the other stored.
    @Test func twoSessionsOverOneFileNeverWriteOverEachOther() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let clock = TestClock(), api = FakeOrdersAPI()
        api.holdWrites(true)
        defer {
            api.holdWrites(false)
            api.releaseWrites()
        }
        let first = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: FileActionStorage(url: url))
        let second = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: FileActionStorage(url: url))
        let a = try await first.queue(.changeStatus(of: 1, to: .accepted), expecting: .any)  // neither runs
        let b = try await second.queue(.changeStatus(of: 2, to: .accepted), expecting: .any)
        let c = try await first.queue(.changeStatus(of: 3, to: .accepted), expecting: .any)
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [a.id, b.id, c.id])
        #expect(await first.pendingActions.map(\.id) == [a.id, b.id, c.id])
        await first.start()  // runs: holds the file
        await #expect(throws: ActionStorageInUse.self) { try await second.queue(.completeStage(5, of: 2), expecting: .any) }
        await second.start()  // cannot take it: sends nothing
        await first.stop()
        let d = try await second.queue(.completeStage(5, of: 2), expecting: .any)  // running now: takes it
        #expect(await second.pendingActions.map(\.id) == [a.id, b.id, c.id, d.id])
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [a.id, b.id, c.id, d.id])
        await second.stop()
    }

    /// A stopped session lets the file go: the app's new session (after a logout or a 4001) keeps
    /// actions at once, with the stopped one's, even while the stopped one is still referenced
    /// (the app's own reference, a fetch still waiting). It kept its claim until it was gone, and
    /// the new session refused every action with `ActionStorageInUse` meanwhile. An action the
    /// driver taps on the stopped session's screen is kept too, without taking the file for good.
    @Test func aStoppedSessionLetsTheNextOneTakeTheFile() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let clock = TestClock(), api = FakeOrdersAPI()
        let transport = FakeEventTransport()
        let first = DriverSession(api: api, transport: transport, clock: clock, actionStorage: FileActionStorage(url: url))
        api.holdWrites(true)
        defer {
            api.holdWrites(false)
            api.releaseWrites()
        }
        await first.start()
        await eventually("connecting") { transport.connections.count == 1 }
        transport.current?.receiveConnected()
        await eventually("live") { await first.connectionState == .live }
        let kept = try await first.queue(.changeStatus(of: 2, to: .accepted), expecting: .any)
        await eventually("on its way") { api.heldWriteCount == 1 }
        await first.stop()
        #expect(try FileActionStorage(url: url).claim() != nil, "free once the session stopped")
        let tapped = try await first.queue(.completeStage(4, of: 2), expecting: .any)  // on the stopped screen
        #expect(try FileActionStorage(url: url).claim() != nil, "and again after the action it kept")
        let second = DriverSession(api: api, transport: FakeEventTransport(), clock: clock, actionStorage: FileActionStorage(url: url))
        await second.start()
        let mine = try await second.queue(.completeStage(5, of: 2), expecting: .any)
        #expect(await second.pendingActions.map(\.id) == [kept.id, tapped.id, mine.id])
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [kept.id, tapped.id, mine.id])
        // The stopped one cannot take it back while the second runs, and writes nothing.
        await #expect(throws: ActionStorageInUse.self) { try await first.queue(.completeStage(6, of: 2), expecting: .any) }
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).map(\.id) == [kept.id, tapped.id, mine.id])
        await second.stop()
        withExtendedLifetime(first) {}
    }

    /// A session that does not run holds the file for a write only, however the write ends: a
    /// queue file that could not be read (a phone still locked) kept it claimed, and the app's
    /// next session refused every action.
    @Test func aWriteThatFailsOnAStoppedSessionStillLetsTheFileGo() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let locked = LockedStorage(FileActionStorage(url: url), failingLoads: 2)
        let session = DriverSession(api: FakeOrdersAPI(), transport: FakeEventTransport(), clock: TestClock(), actionStorage: locked)
        #expect(try FileActionStorage(url: url).claim() != nil, "free after the session was made")
        await #expect(throws: CocoaError.self) { try await session.queue(.completeStage(4, of: 2), expecting: .any) }
        #expect(try FileActionStorage(url: url).claim() != nil, "free after the write that could not read")
        let kept = try await session.queue(.completeStage(4, of: 2), expecting: .any)  // readable now
        #expect(try FileActionStorage(url: url).claim() != nil, "and after the one that kept its action")
        #expect(await session.pendingActions.map(\.id) == [kept.id])
    }

    /// A save that failed (a full disk) left the file behind memory: letting the file go, the
    /// session writes it once more, so the next session does not send an applied action again.
    @Test func aSessionLettingGoOfItsFileAfterAFailedSaveWritesItFirst() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let url = directory.appendingPathComponent("actions.json")
        let storage = FailingSaves(FileActionStorage(url: url)), api = FakeOrdersAPI(), transport = FakeEventTransport()
        let session = DriverSession(api: api, transport: transport, clock: TestClock(), actionStorage: storage)
        api.holdWrites(true)
        await session.start()
        await eventually("connecting") { transport.connections.count == 1 }
        transport.current?.receiveConnected()
        await eventually("live") { await session.connectionState == .live }
        _ = try await session.queue(.changeStatus(of: 2, to: .accepted), expecting: .any)
        await eventually("on its way") { api.heldWriteCount == 1 }
        storage.failing.withLock { $0 = true }  // the disk is full when the answer comes
        api.holdWrites(false)
        api.releaseWrites()
        await eventually("applied") { await session.pendingActions.isEmpty }
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).count == 1, "the file is behind")
        storage.failing.withLock { $0 = false }
        await session.stop()
        #expect(try StoredActionQueue.decode(Data(contentsOf: url)).isEmpty, "written again as it let go")
    }

    /// A queue file in a fresh directory holding `action`, queued by an earlier session; `body` gets
    /// the file, the clock and API that session used, and the queued action. The directory goes after.
    func withQueueFile(
        holding action: DriverAction, expecting: ExpectedVersion,
        _ body: (FileActionStorage, TestClock, FakeOrdersAPI, QueuedAction) async throws -> Void
    ) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-queue-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = FileActionStorage(url: directory.appendingPathComponent("actions.json"))
        let clock = TestClock(), api = FakeOrdersAPI()
        let earlier = try await DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, actionStorage: file, wallClock: Harness.wallClock(clock)
        ).queue(action, expecting: expecting)
        try await body(file, clock, api, earlier)
    }

    /// A queue file that cannot be read when the session is made (a phone not yet unlocked, an I/O
    /// error) is not written over by the next action: while it still cannot be read the action is
    /// refused (the driver sees it was not kept); once it can, its actions come first.
    @Test func aQueueThatCouldNotBeReadAtStartIsNeverWrittenOver() async throws {
        let document = DriverAction.attachDocument(name: "CMR scan", kind: "cmr", to: 2)
        try await withQueueFile(holding: document, expecting: .shownDetail) { file, clock, api, earlier in
            let locked = LockedStorage(file, failingLoads: 2)
            let session = DriverSession(
                api: api, transport: FakeEventTransport(), clock: clock, actionStorage: locked, wallClock: Harness.wallClock(clock))
            #expect(await session.actionStorageUnreadable)
            await #expect(throws: (any Error).self, "still locked: the action is not kept") {
                try await session.queue(.completeStage(4, of: 2), expecting: .any)
            }
            #expect(try StoredActionQueue.decode(Data(contentsOf: file.url)) == [earlier], "the file is untouched")
            let later = try await session.queue(.completeStage(4, of: 2), expecting: .any)  // unlocked now
            #expect(await session.pendingActions.map(\.id) == [earlier.id, later.id], "the earlier action first")
            #expect(try StoredActionQueue.decode(Data(contentsOf: file.url)).map(\.id) == [earlier.id, later.id])
            #expect(await session.actionStorageUnreadable == false, "read now")
        }
    }

    /// The queue is also read again when the session starts or the app comes back (the phone was
    /// unlocked meanwhile), not only when the driver acts: what waited there is sent.
    @Test func aQueueThatCouldNotBeReadAtStartIsReadAgainWhenTheAppComesBack() async throws {
        try await withQueueFile(holding: .changeStatus(of: 2, to: .accepted), expecting: .any) { file, clock, api, earlier in
            let (session, locked) = await Self.startedOverALockedQueue(file, clock: clock, api: api)
            locked.unlock()
            await session.appDidBecomeActive()  // unlocked now
            #expect(await session.pendingActions.map(\.id) == [earlier.id] || api.appliedWriteKeys == [earlier.id.rawValue])
            await eventually("sent") { api.appliedWriteKeys == [earlier.id.rawValue] }
            await session.stop()
        }
    }

    /// A queue that could not be read at start (another session still held the file while the app
    /// stopped it, or the phone was locked) is read again at the next sign that the server is
    /// reachable (a poll, a fetch, the socket going live), not only when the app comes back or the
    /// driver taps another action: meanwhile the waiting actions were neither shown nor sent
    /// (found by a review).
    @Test func aQueueThatCouldNotBeReadAtStartIsReadAgainAtTheNextFetch() async throws {
        try await withQueueFile(holding: .changeStatus(of: 2, to: .accepted), expecting: .any) { file, clock, api, earlier in
            let (session, locked) = await Self.startedOverALockedQueue(file, clock: clock, api: api)
            locked.unlock()
            await clock.advance(by: .seconds(120))  // the poll
            await eventually("read and sent at the poll") { api.appliedWriteKeys == [earlier.id.rawValue] }
            await session.stop()
        }
    }

    /// A session started over `file` while it cannot be read: the session's first read, its start's
    /// and its first list fetch's have all failed, so what reads the queue after `unlock` is the
    /// step the test takes.
    static func startedOverALockedQueue(
        _ file: FileActionStorage, clock: TestClock, api: FakeOrdersAPI
    ) async -> (DriverSession, LockedStorage) {
        let locked = LockedStorage(file, failingLoads: .max)
        let session = DriverSession(
            api: api, transport: FakeEventTransport(), clock: clock, actionStorage: locked, wallClock: Harness.wallClock(clock))
        await session.start()
        await eventually("the first list fetch's read") { locked.loadAttempts >= 3 }
        #expect(await session.pendingActions.isEmpty)
        return (session, locked)
    }

    static func name(_ state: ActionState) -> String {
        switch state {
        case .waiting: "waiting"
        case .sending: "sending"
        case .applied: "applied"
        case .refused: "refused"
        }
    }
}

/// A storage whose first `failingLoads` reads fail, as a file does on a phone not yet unlocked.
/// A storage whose saves fail while `failing` is set (a full disk).
final class FailingSaves: ActionStorage {
    private let wrapped: any ActionStorage
    let failing = Mutex(false)
    init(_ wrapped: any ActionStorage) { self.wrapped = wrapped }
    func load() throws -> Data? { try wrapped.load() }
    func save(_ data: Data) throws {
        if failing.withLock({ $0 }) { throw CocoaError(.fileWriteOutOfSpace) }
        try wrapped.save(data)
    }
    func setAsideUnreadable() throws { try wrapped.setAsideUnreadable() }
    func claim() throws -> ActionStorageClaim? { try wrapped.claim() }
}

final class LockedStorage: ActionStorage {
    private let wrapped: any ActionStorage
    private let remainingFailures: Mutex<Int>
    init(_ wrapped: any ActionStorage, failingLoads: Int) {
        self.wrapped = wrapped
        remainingFailures = Mutex(failingLoads)
    }
    /// Reads work from now on (the phone was unlocked).
    func unlock() { remainingFailures.withLock { $0 = 0 } }
    private let attempts = Mutex(0)
    /// Reads tried so far, failed ones included.
    var loadAttempts: Int { attempts.withLock { $0 } }
    func load() throws -> Data? {
        attempts.withLock { $0 += 1 }
        let fail = remainingFailures.withLock { remaining -> Bool in
            defer { remaining = max(0, remaining - 1) }
            return remaining > 0
        }
        if fail { throw CocoaError(.fileReadNoPermission) }
        return try wrapped.load()
    }
    func save(_ data: Data) throws { try wrapped.save(data) }
    func setAsideUnreadable() throws { try wrapped.setAsideUnreadable() }
    func claim() throws -> ActionStorageClaim? { try wrapped.claim() }
}

/// A storage holding what it was given, whose unreadable contents cannot be set aside.
final class UnmovableStorage: ActionStorage {
    private let data: Mutex<Data?>
    init(holding data: Data) { self.data = Mutex(data) }
    var stored: Data? { data.withLock { $0 } }
    func load() throws -> Data? { stored }
    func save(_ data: Data) throws { self.data.withLock { $0 = data } }
    func setAsideUnreadable() throws { throw CocoaError(.fileWriteVolumeReadOnly) }
}
