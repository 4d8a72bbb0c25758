import Testing
import WaybillTesting

@testable import WaybillClient

@Suite(.timeLimit(.minutes(1))) struct StateMachineTests {
    typealias Machine = DriverSession.StateMachine

    private func connected(_ newest: EventID? = 10) -> ServerFrame {
        .connected(ConnectedFrame(userID: 7, groups: ["driver_7"], newestEventID: newest))
    }

    private func event(_ order: OrderID, _ id: EventID, _ kind: OrderEventKind = .statusChanged) -> ServerFrame {
        .event(OrderEventFrame(kind: kind, orderID: order, eventID: id))
    }

    @Test func startConnectsWithoutACursorAndGoingLiveRefreshesTheList() {
        var machine = Machine(policy: .standard)
        #expect(machine.start() == .connect(since: nil))
        #expect(machine.state == .connecting(attempt: 0))
        #expect(machine.received(connected(10)) == .refreshList)
        #expect(machine.state == .live)
        #expect(machine.lastEventID == 10)
    }

    @Test func orderEventsAdvanceTheCursorAndAskForSync() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(connected(10))
        let frame = OrderEventFrame(kind: .updated, orderID: 4, eventID: 11)
        #expect(machine.received(.event(frame)) == .orderChanged(frame))
        #expect(machine.lastEventID == 11)
    }

    @Test func aRepeatedEventIsIgnored() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(connected(10))
        _ = machine.received(event(4, 12))
        #expect(machine.received(event(4, 12)) == .none)
        #expect(machine.received(event(4, 11)) == .none)
    }

    @Test func pongUnknownAndMalformedFramesDoNothing() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(connected())
        #expect(machine.received(.pong) == .none)
        #expect(machine.received(.unknown(type: "x")) == .none)
        #expect(machine.received(.malformed) == .none)
        #expect(machine.state == .live)
    }

    @Test func resetRefreshesEverything() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(connected())
        #expect(machine.received(.reset) == .refreshEverything)
    }

    @Test func classicPresetRetriesAfterOneTwoFourSecondsThenPolls() {
        var machine = Machine(policy: .classic)
        var random = SeededGenerator(seed: 7)
        _ = machine.start()
        var actions: [Machine.Action] = []
        for _ in 0..<4 {
            actions.append(machine.socketClosed(code: 1006, random: &random))
            if case .reconnect = actions.last { _ = machine.backoffElapsed() }
        }
        #expect(
            actions == [
                .reconnect(after: .seconds(1), since: nil), .reconnect(after: .seconds(2), since: nil),
                .reconnect(after: .seconds(4), since: nil), .pollOnly,
            ]
        )
        #expect(machine.state == .pollingOnly)
    }

    @Test func backoffStatesAreObservable() {
        var machine = Machine(policy: .classic)
        var random = SeededGenerator(seed: 7)
        _ = machine.start()
        _ = machine.socketClosed(code: nil, random: &random)
        #expect(machine.state == .backingOff(attempt: 0, delay: .seconds(1)))
        #expect(machine.backoffElapsed() == .connect(since: nil))
        #expect(machine.state == .connecting(attempt: 1))
    }

    @Test(arguments: [(4001, StopReason.notAuthenticated), (4003, .notAllowed)])
    func authenticationAndPermissionClosesStopAtOnce(code: Int, reason: StopReason) {
        var machine = Machine(policy: .standard)
        var random = SeededGenerator(seed: 7)
        _ = machine.start()
        _ = machine.received(connected())
        #expect(machine.socketClosed(code: code, random: &random) == .stop(reason))
        #expect(machine.state == .stopped(reason))
        // Nothing brings it back but an explicit start: not a later close, nor a wake-up.
        #expect(machine.socketClosed(code: 1006, random: &random) == .none)
        #expect(machine.wakeUp() == .none)
        #expect(machine.backoffElapsed() == .none)
    }

    /// A 4001 before `connected` may be a ticket that expired or was used on its way in (a slow
    /// link, a suspended phone): one more attempt, with a fresh ticket, tells it from a refused
    /// token; a second 4001 before `connected` in a row stops. It logged a valid driver out.
    @Test func a4001BeforeConnectedIsTriedOnceMore() {
        var random = SeededGenerator(seed: 7)
        /// Whether a 4001 closing the machine's socket now is tried once more (a reconnect).
        func retried(_ machine: inout Machine) -> Bool {
            if case .reconnect = machine.socketClosed(code: 4001, random: &random) { return true }
            return false
        }
        var machine = Machine(policy: .standard)
        _ = machine.start()
        let machineRetried = retried(&machine)
        #expect(machineRetried, "stopped at the first 4001 before connected: \(machine.state)")
        _ = machine.backoffElapsed()
        #expect(machine.socketClosed(code: 4001, random: &random) == .stop(.notAuthenticated))
        #expect(machine.state == .stopped(.notAuthenticated))
        // After a socket that got through, a refusal before `connected` is tried once more again.
        var other = Machine(policy: .standard)
        _ = other.start()
        _ = other.socketClosed(code: 4001, random: &random)
        _ = other.backoffElapsed()
        _ = other.received(connected())
        _ = other.socketClosed(code: 1006, random: &random)
        _ = other.backoffElapsed()
        let otherRetried = retried(&other)
        #expect(otherRetried, "the retry was not given back by `connected`: \(other.state)")
        // "In a row": another close between two refusals gives the retry back (a bad link between
        // two expired tickets), and so does a new start.
        var flaky = Machine(policy: .standard)
        _ = flaky.start()
        _ = flaky.socketClosed(code: 4001, random: &random)
        _ = flaky.backoffElapsed()
        _ = flaky.socketClosed(code: 1006, random: &random)
        _ = flaky.backoffElapsed()
        let flakyRetried = retried(&flaky)
        #expect(flakyRetried, "a 1006 between two refusals did not give the retry back: \(flaky.state)")
        var restarted = Machine(policy: .standard)
        _ = restarted.start()
        _ = restarted.socketClosed(code: 4001, random: &random)
        _ = restarted.stop()
        _ = restarted.start()
        let restartedRetried = retried(&restarted)
        #expect(restartedRetried, "a new start did not give the retry back: \(restarted.state)")
    }

    @Test(arguments: [4008, 1001, 1012, 1006, 1000, 1011])
    func otherClosesReconnectWithResume(code: Int) {
        var machine = Machine(policy: .standard)
        var random = MaxGenerator()
        _ = machine.start()
        _ = machine.received(connected(10))
        _ = machine.received(event(1, 15))
        #expect(machine.socketClosed(code: code, random: &random) == .reconnect(after: .seconds(1), since: 15))
    }

    @Test func reconnectResumesAfterTheLastEventAndRefreshesTheListWhenLive() {
        var machine = Machine(policy: .standard)
        var random = MaxGenerator()
        _ = machine.start()
        _ = machine.received(connected(10))
        _ = machine.received(event(1, 11))
        _ = machine.received(event(2, 12))
        _ = machine.socketClosed(code: 1012, random: &random)
        #expect(machine.backoffElapsed() == .connect(since: 12))
        // The server's newest id does not move the cursor past events still to be replayed.
        #expect(machine.received(connected(20)) == .refreshListAndProbeResume)
        #expect(machine.lastEventID == 12)
    }

    /// After a restore or failover versions repeat with other content: queued actions wait, on a
    /// socket that resumes, until the server shows whether its history is the one resumed from.
    @Test func aResumingSocketHoldsQueuedActionsUntilThePongAnEventOrAReset() {
        var random = MaxGenerator()
        func resumed() -> Machine {
            var machine = Machine(policy: .standard)
            _ = machine.start()
            #expect(!machine.holdsActions, "a first connect has nothing to resume: no reset can come")
            #expect(machine.received(connected(10)) == .refreshList)
            _ = machine.received(event(1, 11))
            _ = machine.socketClosed(code: 1006, random: &random)
            #expect(machine.holdsActions, "backing off after a live socket: the next one resumes, an action must not go first")
            #expect(machine.backoffElapsed() == .connect(since: 11))
            #expect(machine.holdsActions, "connecting to resume")
            #expect(machine.received(connected(20)) == .refreshListAndProbeResume)
            #expect(machine.holdsActions, "live, outcome unknown")
            return machine
        }
        var ponged = resumed()
        #expect(ponged.received(.pong) == .resumeConfirmed)
        #expect(!ponged.holdsActions)
        #expect(ponged.received(.pong) == .none, "a heartbeat's pong later means nothing more")

        var replayed = resumed()
        #expect(replayed.received(event(2, 12)) == .orderChanged(OrderEventFrame(kind: .statusChanged, orderID: 2, eventID: 12)))
        #expect(!replayed.holdsActions, "reset never follows an event")

        var rewound = resumed()
        #expect(rewound.received(.reset) == .refreshEverything)
        #expect(!rewound.holdsActions)

        var slow = resumed()
        #expect(slow.resumeProbeTimedOut() == .resumeConfirmed)
        #expect(!slow.holdsActions)
        #expect(slow.resumeProbeTimedOut() == .none)

        var dropped = resumed()
        _ = dropped.socketClosed(code: nil, random: &random)
        #expect(dropped.holdsActions, "backing off: the server may be down; the action must not race the resume")
        #expect(dropped.resumeProbeTimedOut() == .none, "the limit is for a live socket")
        #expect(dropped.backoffElapsed() == .connect(since: 11))
        #expect(dropped.holdsActions, "the next connect asks again")

        // A socket that keeps failing to open while REST calls answer (a proxy blocks WebSockets)
        // cannot tell: after two such attempts the queue goes.
        var blocked = resumed()
        _ = blocked.socketClosed(code: nil, random: &random)
        _ = blocked.backoffElapsed()
        blocked.restAnswered()
        _ = blocked.socketClosed(code: nil, random: &random)
        #expect(blocked.holdsActions, "one failed upgrade is not enough")
        _ = blocked.backoffElapsed()
        _ = blocked.socketClosed(code: nil, random: &random)
        #expect(blocked.holdsActions, "nor two without REST answering before the second")
        _ = blocked.backoffElapsed()
        blocked.restAnswered()
        _ = blocked.socketClosed(code: nil, random: &random)
        #expect(!blocked.holdsActions)
        _ = blocked.backoffElapsed()
        #expect(!blocked.holdsActions, "the release lasts over the next attempts")
        #expect(blocked.received(connected(20)) == .refreshListAndProbeResume, "until one gets through: it can tell")
        #expect(blocked.holdsActions)

        // Sockets that say `connected` and close before the outcome (a failing replay): three in a row.
        var failing = resumed()
        for round in 1...3 {
            #expect(failing.holdsActions, "round \(round)")
            _ = failing.socketClosed(code: 1011, random: &random)
            _ = failing.backoffElapsed()
            if round < 3 { _ = failing.received(connected(20)) }
        }
        #expect(!failing.holdsActions)
        #expect(failing.received(connected(20)) == .refreshListAndProbeResume)
        #expect(failing.received(.pong) == .resumeConfirmed)

        // A server that closes the socket (1013 in a reconnect storm) shows WebSockets get through.
        var busy = resumed()
        _ = busy.socketClosed(code: nil, random: &random)
        for _ in 0..<3 {
            _ = busy.backoffElapsed()
            busy.restAnswered()
            _ = busy.socketClosed(code: 1013, random: &random)
        }
        #expect(busy.holdsActions)
        _ = busy.stop()
        _ = busy.start()
        busy.restAnswered()
        _ = busy.socketClosed(code: nil, random: &random)
        #expect(busy.holdsActions, "a start counts afresh")

        var classic = Machine(policy: .classic)
        _ = classic.start()
        _ = classic.received(connected(10))
        _ = classic.received(event(1, 11))
        for _ in 0..<3 {
            _ = classic.socketClosed(code: nil, random: &random)
            _ = classic.backoffElapsed()
        }
        #expect(classic.holdsActions)
        #expect(classic.socketClosed(code: nil, random: &random) == .pollOnly)
        #expect(!classic.holdsActions, "a socket given up on does not hold the queue")
    }

    @Test func aSocketThatProvedStableResetsTheAttemptCount() {
        var machine = Machine(policy: .classic)
        var random = MaxGenerator()
        _ = machine.start()
        _ = machine.socketClosed(code: nil, random: &random)
        _ = machine.backoffElapsed()
        _ = machine.socketClosed(code: nil, random: &random)  // attempt 1: 2 s
        _ = machine.backoffElapsed()
        _ = machine.received(connected())
        machine.provedStable()
        #expect(machine.socketClosed(code: 1001, random: &random) == .reconnect(after: .seconds(1), since: 10))
    }

    /// A server at capacity answers `connected`, then closes with 1013: going live alone must not
    /// bring the delay back to the first one, or the whole fleet returns at once, again and again.
    @Test func goingLiveAloneDoesNotResetTheAttemptCount() {
        var machine = Machine(policy: .classic)
        var random = MaxGenerator()
        _ = machine.start()
        _ = machine.received(connected())
        #expect(machine.socketClosed(code: 1013, random: &random) == .reconnect(after: .seconds(1), since: 10))
        _ = machine.backoffElapsed()
        _ = machine.received(connected())
        #expect(machine.socketClosed(code: 1013, random: &random) == .reconnect(after: .seconds(2), since: 10))
        _ = machine.backoffElapsed()
        _ = machine.received(connected())
        #expect(machine.socketClosed(code: 1013, random: &random) == .reconnect(after: .seconds(4), since: 10))
        machine.provedStable()  // backing off, not live: nothing was proved
        _ = machine.backoffElapsed()
        #expect(machine.socketClosed(code: nil, random: &random) == .pollOnly, "the classic preset's three tries are spent")
    }

    @Test func wakeUpReconnectsAtOnceFromBackoffOrPollingOnly() {
        var machine = Machine(policy: .classic)
        var random = MaxGenerator()
        _ = machine.start()
        _ = machine.received(connected(10))
        _ = machine.socketClosed(code: 1006, random: &random)
        #expect(machine.wakeUp() == .connect(since: 10))
        #expect(machine.state == .connecting(attempt: 1))
        // The attempt count is kept: the next failure backs off longer, not from the first delay
        // again (a network that comes and goes woke it every few seconds).
        #expect(machine.socketClosed(code: 1006, random: &random) == .reconnect(after: .seconds(2), since: 10))
        _ = machine.backoffElapsed()
        for _ in 0..<3 {
            _ = machine.socketClosed(code: 1006, random: &random)
            _ = machine.backoffElapsed()
        }
        #expect(machine.state == .pollingOnly)
        #expect(machine.wakeUp() == .connect(since: 10))
        // A fresh budget of attempts after a wake-up.
        #expect(machine.socketClosed(code: 1006, random: &random) == .reconnect(after: .seconds(1), since: 10))
    }

    /// A backoff after the server asked to wait (1013, also a ticket answered 429/503; 1011, 1012,
    /// 1008) is not cut short by a wake-up: each early reconnect cost the server a ticket, a
    /// handshake and a refetch, at the rate the phone woke. After a drop (no code, 1006) it is.
    @Test func wakeUpKeepsTheBackoffTheServerAskedFor() {
        for code in [1008, 1011, 1012, 1013] {
            var machine = Machine(policy: .classic)
            var random = MaxGenerator()
            _ = machine.start()
            _ = machine.received(connected(10))
            #expect(machine.socketClosed(code: code, random: &random) == .reconnect(after: .seconds(1), since: 10))
            #expect(machine.wakeUp() == .refetchWhileWaiting, "after \(code): no socket, a refetch")
            #expect(machine.state == .backingOff(attempt: 0, delay: .seconds(1)))
            #expect(machine.backoffElapsed() == .connect(since: 10))
            // The next close is a drop: a wake-up shortens that backoff again.
            _ = machine.socketClosed(code: nil, random: &random)
            #expect(machine.wakeUp() == .connect(since: 10), "after a drop following \(code)")
        }
    }

    @Test func wakeUpLeavesALiveSocketAlone() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        #expect(machine.wakeUp() == .none)
        _ = machine.received(connected())
        #expect(machine.wakeUp() == .none)
    }

    @Test func stopDisconnectsAndStartResumes() {
        var machine = Machine(policy: .standard)
        _ = machine.start()
        _ = machine.received(connected(10))
        #expect(machine.stop() == .disconnect)
        #expect(machine.state == .stopped(.stoppedByApp))
        #expect(machine.stop() == .none)
        #expect(machine.start() == .connect(since: 10))
    }
}
