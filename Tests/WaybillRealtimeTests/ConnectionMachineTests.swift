import Testing
import WaybillDomain
import WaybillRealtime
import WaybillTesting

/// The hub's per-socket protocol on plain values: frames are strings naming their event id.
struct ConnectionMachineTests {
    typealias Machine = ConnectionMachine<String>
    static let group = Group.driver(7)
    static let newest = EventCursor(id: 10, check: "0000000a")

    static func frame(_ id: Int64) -> String { "e\(id)" }
    static func replayed(_ ids: [Int64]) -> Machine.ReplayResult { .events(ids.map { (EventID($0), frame($0)) }) }

    /// Feeds live events; returns the frames sent at once.
    static func live(_ machine: inout Machine, _ ids: [Int64]) -> [String] {
        ids.compactMap { id in
            if case .send(let frame) = machine.live(EventID(id), frame(id)) { return frame }
            return nil
        }
    }

    static func sent(_ actions: [Machine.Action]) -> [String] {
        actions.flatMap { action -> [String] in
            if case .send(let frames) = action { return frames }
            return []
        }
    }

    @Test func firstConnectGoesLiveFromTheNewestDeliveredEvent() {
        var machine = Machine()
        let actions = machine.authenticated(user: 7, group: Self.group, resume: .none, newest: Self.newest)
        #expect(actions == [.sendConnected(Self.newest)])
        #expect(machine.phase == .live)
        #expect(Self.live(&machine, [9, 10, 11, 12]) == ["e11", "e12"])
    }

    /// `seen` while the resume's outcome is unknown waits for it: recorded after the replay's
    /// events (this history's), dropped with a `reset` (a restore may have taken its versions'
    /// content back); recorded at once when live, never before authentication (reviews, 2026-12-07).
    @Test func receiptsWaitForTheResumesOutcome() {
        let reports = [SeenReport(orderID: 4, version: 2)], more = [SeenReport(orderID: 5, version: 1)]
        var unauthenticated = Machine()
        #expect(unauthenticated.seen(reports) == .ignore)

        var resumed = Machine()
        _ = resumed.authenticated(user: 7, group: Self.group, resume: .since(5), newest: Self.newest)
        #expect(resumed.seen(reports) == .afterReplay)
        #expect(resumed.seen(more) == .afterReplay)
        let actions = resumed.replayLoaded(Self.replayed([6, 7]))
        #expect(actions.last == .recordSeen(reports + more), "after the replayed events")
        #expect(resumed.seen(reports) == .record, "live: at once")

        var reset = Machine()
        _ = reset.authenticated(user: 7, group: Self.group, resume: .since(5), newest: Self.newest)
        #expect(reset.seen(reports) == .afterReplay)
        let afterReset = reset.replayLoaded(.reset(newest: 10))
        #expect(!afterReset.contains { if case .recordSeen = $0 { true } else { false } }, "\(afterReset)")

        var closing = Machine()
        _ = closing.authenticated(user: 7, group: Self.group, resume: .since(5), newest: Self.newest)
        #expect(closing.seen(reports) == .afterReplay)
        closing.closing()
        #expect(closing.seen(reports) == .ignore)
    }

    @Test func unauthenticatedSocketsNeverGetEventsNorPongs() {
        var machine = Machine()
        #expect(Self.live(&machine, [1, 2, 3]).isEmpty)
        #expect(!machine.answersPings)
        #expect(machine.refused(.notAuthenticated) == .close(code: 4001, reason: "not authenticated"))
        #expect(Self.live(&machine, [4]).isEmpty)
        // Authentication that arrives after a refusal admits nothing.
        #expect(machine.authenticated(user: 7, group: Self.group, resume: .none, newest: Self.newest).isEmpty)
        #expect(Self.live(&machine, [11]).isEmpty)
    }

    @Test func refusalsMapToTheirCloseCodes() {
        var a = Machine(), b = Machine()
        #expect(a.refused(.noCompany) == .close(code: 4003, reason: "no company"))
        #expect(b.refused(.unavailable) == .close(code: 1011, reason: "try again"))
    }

    @Test func sinceAsksForAnUncheckedReplayAndCursorForAChecked() {
        var bySince = Machine(), byCursor = Machine()
        let cursor = EventCursor(id: 4, check: "deadbeef")
        let a = bySince.authenticated(user: 7, group: Self.group, resume: .since(4), newest: Self.newest)
        let b = byCursor.authenticated(user: 7, group: Self.group, resume: .cursor(cursor), newest: Self.newest)
        #expect(a == [.sendConnected(Self.newest), .runReplay(.init(group: Self.group, after: 4, expected: nil))])
        #expect(b == [.sendConnected(Self.newest), .runReplay(.init(group: Self.group, after: 4, expected: cursor))])
        #expect(bySince.phase == .replaying && byCursor.phase == .replaying)
    }

    @Test func liveEventsWaitWhileReplayingThenMergeWithoutGapOrDuplicate() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .since(4), newest: Self.newest)
        // 9 and 10 were committed before the replay's snapshot and delivered late; 11, 12 after it.
        #expect(Self.live(&machine, [9, 10, 11, 12]).isEmpty)
        let actions = machine.replayLoaded(Self.replayed([5, 6, 9, 10]))
        #expect(Self.sent(actions) == ["e5", "e6", "e9", "e10", "e11", "e12"])
        #expect(machine.phase == .live && machine.lastSent == 12)
        #expect(Self.live(&machine, [12, 13]) == ["e13"])
    }

    @Test func nothingAtOrBelowLastSentIsSentTwice() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .none, newest: Self.newest)
        #expect(Self.live(&machine, [11, 11, 12, 10, 12, 13, 5]) == ["e11", "e12", "e13"])
    }

    @Test func resetThenContinuesFromTheStoresNewestNotTheClientsCursor() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .since(999_999), newest: Self.newest)
        #expect(Self.live(&machine, [11, 12, 13]).isEmpty)
        let actions = machine.replayLoaded(.reset(newest: 12))
        #expect(actions == [.sendReset, .send(["e13"])])
        #expect(machine.lastSent == 13)
        #expect(Self.live(&machine, [14]) == ["e14"])
    }

    /// A ping during the replay is answered after the replay's frames, or after its `reset`: the
    /// pong tells a resuming client that no `reset` is still coming (its queued actions may go).
    @Test func aPingDuringTheReplayIsAnsweredAfterItsFramesOrItsReset() {
        var replaying = Machine()
        _ = replaying.authenticated(user: 7, group: Self.group, resume: .since(4), newest: Self.newest)
        #expect(replaying.ping() == .afterReplay)
        #expect(replaying.ping() == .afterReplay)
        #expect(replaying.replayLoaded(Self.replayed([5, 6])) == [.send(["e5", "e6"]), .sendPongs(2)])
        #expect(replaying.ping() == .pong, "live: at once")

        var rewound = Machine()
        _ = rewound.authenticated(user: 7, group: Self.group, resume: .cursor(EventCursor(id: 9, check: "deadbeef")), newest: Self.newest)
        #expect(rewound.ping() == .afterReplay)
        _ = Self.live(&rewound, [11])
        #expect(rewound.replayLoaded(.reset(newest: 10)) == [.sendReset, .send(["e11"]), .sendPongs(1)])

        var quiet = Machine()
        _ = quiet.authenticated(user: 7, group: Self.group, resume: .since(10), newest: Self.newest)
        for _ in 0..<50 { _ = quiet.ping() }
        #expect(quiet.replayLoaded(Self.replayed([])) == [.sendPongs(8)], "bounded")
        #expect(quiet.replayLoaded(Self.replayed([])).isEmpty, "owed once")
    }

    @Test func pingsAreAnsweredAtOnceWhenLiveAndNeverBeforeAuthenticationOrWhileClosing() {
        var machine = Machine()
        #expect(machine.ping() == .ignore)
        _ = machine.authenticated(user: 7, group: Self.group, resume: .none, newest: Self.newest)
        #expect(machine.ping() == .pong)
        machine.closing()
        #expect(machine.ping() == .ignore)

        var failing = Machine()
        _ = failing.authenticated(user: 7, group: Self.group, resume: .since(3), newest: Self.newest)
        _ = failing.ping()
        #expect(failing.replayLoaded(.failed) == [.close(code: 1011, reason: "replay failed; reconnect")], "no pong on a close")
    }

    @Test func aFailedReplayClosesWith1011AndSendsNothing() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .since(3), newest: Self.newest)
        _ = Self.live(&machine, [11])
        #expect(machine.replayLoaded(.failed) == [.close(code: 1011, reason: "replay failed; reconnect")])
        #expect(Self.live(&machine, [12]).isEmpty)
    }

    @Test func aReplayAnswerOutsideReplayingIsIgnored() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .none, newest: Self.newest)
        #expect(machine.replayLoaded(Self.replayed([1, 2])).isEmpty)
        #expect(machine.lastSent == 10)
    }

    @Test func closingStopsEverythingIncludingTheBuffer() {
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .since(3), newest: Self.newest)
        _ = Self.live(&machine, [11])
        machine.closing()
        #expect(machine.replayLoaded(Self.replayed([4])).isEmpty)
        #expect(Self.live(&machine, [12]).isEmpty)
        #expect(!machine.answersPings)
    }

    /// Random interleavings of live deliveries (with duplicates) around one replay: the socket
    /// always receives each id of its history once, ascending, with nothing missing.
    @Test(arguments: 0..<40)
    func randomInterleavingsDeliverEachIdOnceInOrder(seed: Int) {
        var random = SeededGenerator(seed: UInt64(seed))
        let since = Int64(random.next() % 5), snapshot = since + Int64(random.next() % 6), end = snapshot + 6
        var machine = Machine()
        _ = machine.authenticated(user: 7, group: Self.group, resume: .since(EventID(since)), newest: Self.newest)
        var received: [String] = []
        // Live deliveries start somewhere at or before the snapshot (the feed may lag), may repeat.
        var next = since + 1 + Int64(random.next() % UInt64(snapshot - since + 1))
        let answerAt = Int(random.next() % 6)
        var step = 0
        while next <= end || step <= answerAt {
            if step == answerAt {
                received += Self.sent(machine.replayLoaded(Self.replayed(Array(stride(from: since + 1, through: snapshot, by: 1)))))
            }
            step += 1
            guard next <= end else { continue }
            received += Self.live(&machine, [next])
            if random.next() % 3 != 0 { next += 1 }  // sometimes the same id comes twice
        }
        let expected = (since + 1...end).map(Self.frame)
        #expect(received == expected)
    }

    /// A resume value the handshake could not read: `connected`, then `reset`, then live from the newest.
    @Test func anUnusableResumeGetsResetAndGoesLive() {
        var machine = ConnectionMachine<String>()
        let actions = machine.authenticated(user: 7, group: Self.group, resume: .unusable, newest: Self.newest)
        #expect(actions == [.sendConnected(Self.newest), .sendReset])
        #expect(machine.live(Self.newest.id, "old") == .skip)
        #expect(machine.live(EventID(Self.newest.id.rawValue + 1), "new") == .send("new"))
    }
}

/// The replay buffer is bounded: a socket whose replay is slow while events pour in is closed.
struct ConnectionMachineBufferBoundTests {
    typealias Machine = ConnectionMachine<String>

    @Test func liveEventsPastTheBufferBoundDuringAReplayClose4008() {
        var machine = Machine(maxBufferedEvents: 3)
        _ = machine.authenticated(user: 7, group: .driver(7), resume: .since(2), newest: EventCursor(id: 5, check: "00000005"))
        #expect(machine.phase == .replaying)
        let buffered = (6...8).map { machine.live(EventID(Int64($0)), "e\($0)") }
        #expect(buffered == [.buffered, .buffered, .buffered])
        #expect(machine.live(9, "e9") == .close(code: 4008, reason: "too many events during replay; resume again"))
        #expect(machine.phase == .closing)
        // Nothing goes out after that: neither the replay's answer nor later events.
        #expect(machine.replayLoaded(.events([(3, "e3")])).isEmpty)
        #expect(machine.live(10, "e10") == .skip)
    }

    /// The buffer is bounded in bytes too: the replay and the buffer go out together, and past the
    /// socket's outbound limit both were dropped by the network layer (a 4008 as a "slow consumer"
    /// with nothing sent, after the whole replay was read).
    @Test func liveBytesPastTheBufferBoundDuringAReplayClose4008() {
        var machine = Machine(maxBufferedEvents: 100, maxBufferedBytes: 250)
        _ = machine.authenticated(user: 7, group: .driver(7), resume: .since(2), newest: EventCursor(id: 5, check: "00000005"))
        #expect(machine.live(6, "e6", bytes: 100) == .buffered)
        #expect(machine.live(7, "e7", bytes: 100) == .buffered)
        #expect(machine.live(8, "e8", bytes: 100) == .close(code: 4008, reason: "too many events during replay; resume again"))
        #expect(machine.replayLoaded(.events([(3, "e3")])).isEmpty)
        // Within the bound, the replay and the buffer go out as before, and the count starts over.
        var within = Machine(maxBufferedEvents: 100, maxBufferedBytes: 250)
        _ = within.authenticated(user: 7, group: .driver(7), resume: .since(2), newest: EventCursor(id: 5, check: "00000005"))
        #expect(within.live(6, "e6", bytes: 200) == .buffered)
        #expect(within.replayLoaded(.events([(3, "e3")])) == [.send(["e3", "e6"])])
    }

    @Test func refusalsForLoadAre1013() {
        var busy = Machine(), late = Machine(), overRate = Machine()
        #expect(busy.refused(.busy) == .close(code: 1013, reason: "server busy; try again later"))
        #expect(late.refused(.timedOut) == .close(code: 1013, reason: "authentication timed out; try again later"))
        #expect(overRate.refused(.overRate) == .close(code: 1013, reason: "too many requests for this user"))
    }

}
