import Foundation
import Testing
import WaybillTesting

@testable import WaybillClient

/// The offline queue's rules on plain values: order, outcomes, retries, limits.
struct ActionQueueTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)

    func action(
        _ key: String, _ action: DriverAction, ifMatch: String? = nil, at offset: TimeInterval = 0
    ) -> QueuedAction {
        QueuedAction(id: ActionID(rawValue: key), action: action, ifMatch: ifMatch, queuedAt: start + offset)
    }

    func saved(_ id: OrderID, version: Int64) -> SavedOrder {
        SavedOrder(
            order: OrderDetail(id: id, number: "n", status: .accepted, driverID: 7, title: "t", version: version),
            etag: FakeOrdersAPI.etag(id, version: version))
    }

    @Test func sendsOneAtATimeInTheOrderTheDriverActed() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        queue.add(action("b", .completeStage(5, of: 1)))
        guard case .send(let first) = queue.next(now: start) else { Issue.record("nothing to send"); return }
        #expect(first.id.rawValue == "a" && first.state == .sending)
        let blocked = queue.next(now: start)
        #expect(blocked == .idle, "the second waits for the first")
        let finish = queue.finished(.applied(saved(1, version: 2)), random: &random)
        #expect(finish != .none)
        guard case .send(let second) = queue.next(now: start) else { Issue.record("second not sent"); return }
        #expect(second.id.rawValue == "b")
    }

    @Test func anAppliedActionMovesLaterActionsOnTheSameVersionToTheNewOne() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        let shown = FakeOrdersAPI.etag(1, version: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted), ifMatch: shown))
        queue.add(action("b", .completeStage(5, of: 1), ifMatch: shown))
        queue.add(action("c", .changeStatus(of: 2, to: .accepted), ifMatch: FakeOrdersAPI.etag(2, version: 1)))
        _ = queue.next(now: start)
        _ = queue.finished(.applied(saved(1, version: 2)), random: &random)
        #expect(queue.actions.map(\.ifMatch) == [FakeOrdersAPI.etag(1, version: 2), FakeOrdersAPI.etag(2, version: 1)])
    }

    /// The answer came without an ETag (a proxy stripped it): the later action names the new version
    /// instead of losing its precondition.
    @Test func anAnswerWithoutATagStillMovesLaterActionsToTheNewVersion() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        let shown = FakeOrdersAPI.etag(1, version: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted), ifMatch: shown))
        queue.add(action("b", .completeStage(5, of: 1), ifMatch: shown))
        _ = queue.next(now: start)
        var untagged = saved(1, version: 2)
        untagged.etag = nil
        _ = queue.finished(.applied(untagged), random: &random)
        #expect(queue.actions.map(\.ifMatch) == [FakeOrdersAPI.etag(1, version: 2)])
    }

    /// A retry policy with a count limit (`.classic`: 3) does not drop an action that only found
    /// the server unreachable: the age limit bounds that.
    @Test func aRetryPolicyWithACountLimitDoesNotDropAnUnreachableAction() {
        var queue = ActionQueue(policy: ActionQueuePolicy(retry: .classic))
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        for _ in 0..<10 {
            _ = queue.next(now: start)
            guard case .retry = queue.finished(.retry(countsAsServerFailure: false), random: &random) else {
                Issue.record("gave up on being offline")
                return
            }
            queue.backoffElapsed()
        }
        #expect(queue.actions.map(\.id.rawValue) == ["a"])
    }

    /// The driver queued A with the detail's tag, then refetched it after its own receipt (same
    /// version, tag `"o1-v1-s1"`) and queued B: B is on the same version and moves on with A.
    @Test func aTagWithAReceiptSuffixNamesTheSameVersion() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted), ifMatch: "\"o1-v1\""))
        queue.add(action("b", .completeStage(5, of: 1), ifMatch: "\"o1-v1-s1\""))
        queue.add(action("c", .completeStage(6, of: 1), ifMatch: "\"o1-v0-s0\""))  // an older version stays
        _ = queue.next(now: start)
        _ = queue.finished(.applied(saved(1, version: 2)), random: &random)
        #expect(queue.actions.map(\.ifMatch) == [FakeOrdersAPI.etag(1, version: 2), "\"o1-v0-s0\""])
        #expect(ActionQueue.versionTag("\"o12-v3-s3\"") == "\"o12-v3\"")
        #expect(ActionQueue.versionTag("\"o12-v3-h0b7e55d1\"") == "\"o12-v3\"")
        #expect(ActionQueue.versionTag("\"o12-v3-h0b7e55d1-s3\"") == "\"o12-v3\"")
        for tag in ["\"o12-v3\"", "\"x\"", "\"", "*", "\"o1-v2-s\"", "\"o1-v2-sx\"", "W/\"o1-v2-s2\"", "\"o1-v2-x1\""] {
            #expect(ActionQueue.versionTag(tag) == tag)
        }
    }

    /// The server's tags carry a check of the version in its history (`-h…`): the driver's own
    /// actions on one version still follow each other, and what goes out keeps the server's tag.
    @Test func tagsWithTheServersCheckFollowEachOther() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted), ifMatch: "\"o1-v1-h0b7e55d1\""))
        queue.add(action("b", .completeStage(5, of: 1), ifMatch: "\"o1-v1-h0b7e55d1-s1\""))
        queue.add(action("c", .completeStage(6, of: 1)))
        queue.add(action("d", .completeStage(7, of: 1), ifMatch: "\"o1-v3-h11111111\""))
        _ = queue.next(now: start)
        let saved = SavedOrder(
            order: OrderDetail(id: 1, number: "n", status: .accepted, driverID: 7, title: "t", version: 2),
            etag: "\"o1-v2-h22222222\"")
        _ = queue.finished(.applied(saved), random: &random)
        #expect(queue.actions.map(\.ifMatch) == ["\"o1-v2-h22222222\"", nil, "\"o1-v3-h11111111\""])
    }

    @Test(arguments: [
        (WaybillClientError.http(status: 409, code: "invalid_transition", message: "cancelled"), "invalid_transition"),
        (WaybillClientError.http(status: 412, code: "precondition_failed", message: "changed"), "precondition_failed"),
        (
            WaybillClientError.http(status: 422, code: "idempotency_key_reused", message: "other body"),
            "idempotency_key_reused"
        ),
        (WaybillClientError.http(status: 404, code: "not_found", message: "gone"), "not_found"),
    ])
    func refusalsLeaveTheQueueWithTheServersReason(error: WaybillClientError, code: String) {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        _ = queue.next(now: start)
        guard case .refused(let refused) = queue.finished(ActionQueue.outcome(for: error), random: &random) else {
            Issue.record("not refused")
            return
        }
        #expect(refused.state == .refused(ActionRefusal(status: error.status, code: code, message: error.message)))
        #expect(queue.actions.isEmpty)
    }

    @Test(arguments: [
        WaybillClientError.unreachable("offline"),
        WaybillClientError.http(status: 503, code: "store_unavailable", message: "down"),
        WaybillClientError.http(status: 500, code: nil, message: nil),
        WaybillClientError.http(status: 409, code: "idempotency_key_in_use", message: "still running"),
        WaybillClientError.http(status: 429, code: "rate_limited", message: "slow down"),
        WaybillClientError.http(status: 401, code: "unauthorized", message: "log in"),
    ])
    func transientFailuresKeepTheActionAndBackOff(error: WaybillClientError) {
        let policy = ActionQueuePolicy(retry: ReconnectPolicy(base: .seconds(1), cap: .seconds(8), jitter: .none))
        var queue = ActionQueue(policy: policy)
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        var delays: [Duration] = []
        for _ in 0..<3 {
            _ = queue.next(now: start)
            guard case .retry(let kept, let delay) = queue.finished(ActionQueue.outcome(for: error), random: &random)
            else {
                Issue.record("not retried")
                return
            }
            #expect(kept.state == .waiting && kept.id.rawValue == "a")
            let waiting = queue.next(now: start)
            #expect(waiting == .idle, "backing off")
            queue.backoffElapsed()
            delays.append(delay)
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4)])
    }

    /// An unreadable 2xx is an applied action (not a server failure toward `gave_up`), and the next
    /// version's tag is the one after the version the action named.
    @Test func anUnreadableSuccessIsAppliedAndTheNextTagFollows() {
        #expect(ActionQueue.outcome(for: .unreadableAnswer(status: 200, etag: nil)) == .appliedUnread(etag: nil))
        #expect(
            ActionQueue.outcome(for: .badResponse("cannot read order"))
                == .retry(countsAsServerFailure: true, mayHaveApplied: true))
        #expect(ActionQueue.tagAfter(#""o42-v7""#) == #""o42-v8""#)
        #expect(ActionQueue.tagAfter(#""o42-v7-h0b7e55d1-s7""#) == #""o42-v8""#)
        #expect(ActionQueue.tagAfter("*") == nil && ActionQueue.tagAfter(#""e1""#) == nil)
        var queue = ActionQueue(policy: ActionQueuePolicy(maxServerFailures: 1))
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted), ifMatch: #""o1-v1-h00000001""#))
        queue.add(action("b", .completeStage(5, of: 1), ifMatch: #""o1-v1-h00000001""#))
        queue.add(action("c", .completeStage(5, of: 2), ifMatch: #""o2-v1""#))
        _ = queue.next(now: start)
        guard case .appliedUnread(let applied) = queue.finished(.appliedUnread(etag: nil), random: &random) else {
            Issue.record("not applied")
            return
        }
        #expect(applied.state == .applied && applied.id.rawValue == "a")
        #expect(queue.actions.map(\.ifMatch) == [#""o1-v2""#, #""o2-v1""#])

        // Sent without If-Match: the answer's ETag tells which version it moved from; followers
        // take that ETag when it names the next version, else the bare next version.
        #expect(ActionQueue.tagBefore(tag: #""o1-v3-h0000000a""#) == #""o1-v2""#)
        var untagged = ActionQueue(policy: ActionQueuePolicy())
        untagged.add(action("d", .changeStatus(of: 1, to: .accepted)))
        untagged.add(action("e", .completeStage(5, of: 1), ifMatch: #""o1-v2-h0000000b""#))
        untagged.add(action("f", .completeStage(6, of: 1), ifMatch: #""o1-v9""#))
        _ = untagged.next(now: start)
        _ = untagged.finished(.appliedUnread(etag: #""o1-v3-h0000000a""#), random: &random)
        #expect(untagged.actions.map(\.ifMatch) == [#""o1-v3-h0000000a""#, #""o1-v9""#])
        var weak = ActionQueue(policy: ActionQueuePolicy())
        weak.add(action("g", .changeStatus(of: 1, to: .accepted), ifMatch: #""o1-v2""#))
        weak.add(action("h", .completeStage(5, of: 1), ifMatch: #""o1-v2""#))
        _ = weak.next(now: start)
        _ = weak.finished(.appliedUnread(etag: #"W/"o1-v3""#), random: &random)
        #expect(weak.actions.map(\.ifMatch) == [#""o1-v3""#], "a tag a proxy rewrote is not used")
    }

    @Test func givesUpAfterTooManyServerFailuresButNotForBeingOffline() {
        var queue = ActionQueue(policy: ActionQueuePolicy(maxServerFailures: 2))
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        let outcomes: [ActionQueue.Outcome] = [
            .retry(countsAsServerFailure: false), .retry(countsAsServerFailure: false),
            .retry(countsAsServerFailure: false), .retry(countsAsServerFailure: true),
        ]
        for outcome in outcomes {
            _ = queue.next(now: start)
            guard case .retry = queue.finished(outcome, random: &random) else { Issue.record("gave up early"); return }
            queue.backoffElapsed()
        }
        _ = queue.next(now: start)
        guard case .refused(let dropped) = queue.finished(.retry(countsAsServerFailure: true), random: &random) else {
            Issue.record("retried a third server failure")
            return
        }
        guard case .refused(let reason) = dropped.state else { Issue.record("not refused"); return }
        #expect(reason.code == "gave_up" && queue.actions.isEmpty)
    }

    /// A store outage (503 `store_unavailable` until PostgreSQL is back), a gateway's 502/504, or a
    /// captive portal's redirect is not the server failing the action: however often it comes,
    /// the action waits (only its age can drop it), unlike a 500.
    @Test(arguments: [
        WaybillClientError.http(status: 503, code: "store_unavailable", message: "down"),
        WaybillClientError.http(status: 502, code: nil, message: nil),
        WaybillClientError.http(status: 504, code: nil, message: nil),
        WaybillClientError.http(status: 302, code: nil, message: nil),
    ])
    func anUnavailableServerNeverMakesTheQueueGiveUp(error: WaybillClientError) {
        var queue = ActionQueue(policy: ActionQueuePolicy(maxServerFailures: 2))
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        for _ in 0..<20 {
            _ = queue.next(now: start)
            guard case .retry = queue.finished(ActionQueue.outcome(for: error), random: &random) else {
                Issue.record("gave up on \(error)")
                return
            }
            queue.backoffElapsed()
        }
        #expect(queue.actions.map(\.id.rawValue) == ["a"])
        #expect(
            ActionQueue.outcome(for: .http(status: 500, code: nil, message: nil))
                == .retry(countsAsServerFailure: true, mayHaveApplied: true))
    }

    @Test func anActionOlderThanTheMaximumAgeExpiresInsteadOfBeingSent() {
        var queue = ActionQueue(policy: ActionQueuePolicy(maxAge: .seconds(3600)))
        queue.add(action("old", .changeStatus(of: 1, to: .accepted)))
        queue.add(action("new", .completeStage(5, of: 1), at: 1800))
        guard case .dropped(let old) = queue.next(now: start + 3601) else { Issue.record("not expired"); return }
        #expect(old.id.rawValue == "old")
        guard case .send(let next) = queue.next(now: start + 3601) else { Issue.record("younger one not sent"); return }
        #expect(next.id.rawValue == "new")
    }

    /// Past the age limit an action is `expired` ("not sent") only if no send of it went without an
    /// answer; one that did may have been applied, and is `unconfirmed` (the mark is stored).
    @Test func anActionSentWithoutAnAnswerExpiresUnconfirmed() throws {
        var random = SeededGenerator(seed: 1)
        var queue = ActionQueue(policy: ActionQueuePolicy(maxAge: .seconds(3600)))
        queue.add(action("lost", .changeStatus(of: 1, to: .accepted)))
        queue.add(action("busy", .completeStage(5, of: 2)))
        queue.add(action("down", .completeStage(6, of: 3)))
        _ = queue.next(now: start)
        _ = queue.finished(ActionQueue.outcome(for: .unreachable("connection lost")), random: &random)
        queue.backoffElapsed()
        let stored = try JSONDecoder().decode([QueuedAction].self, from: JSONEncoder().encode(queue.actions))
        var restarted = ActionQueue(policy: ActionQueuePolicy(maxAge: .seconds(3600)), actions: stored)
        guard case .dropped(let lost) = restarted.next(now: start + 3601),
            case .refused(let lostReason) = lost.state
        else { Issue.record("not dropped"); return }
        #expect(lostReason.code == "unconfirmed")
        /// The next head is sent once, answered `error`, and expires: the code it is refused with.
        func expiryCode(after error: WaybillClientError) -> String? {
            guard case .send = restarted.next(now: start) else { return nil }
            _ = restarted.finished(ActionQueue.outcome(for: error), random: &random)
            restarted.backoffElapsed()
            guard case .dropped(let dropped) = restarted.next(now: start + 3601), case .refused(let reason) = dropped.state
            else { return nil }
            return reason.code
        }
        // Its key still running on the server (409 in use): may be applied too.
        #expect(expiryCode(after: .http(status: 409, code: "idempotency_key_in_use", message: nil)) == "unconfirmed")
        // A proxy's 502 or 504 (its node died or took too long) may hide a commit; a 503 does not.
        for status in [502, 504] {
            #expect(
                ActionQueue.outcome(for: .http(status: status, code: nil, message: nil))
                    == .retry(countsAsServerFailure: false, mayHaveApplied: true))
        }
        // Answered 503 (not applied): expired, "not sent".
        #expect(expiryCode(after: .http(status: 503, code: "store_unavailable", message: nil)) == "expired")
    }

    /// A damaged queue file's failure count cannot trap: `Int.max` was kept as read, and the next
    /// server error's `+= 1` crashed the app, again after every restart.
    @Test func aStoredFailureCountOutOfRangeIsReadWithinRange() throws {
        let data = try StoredActionQueue.encode([action("a", .completeStage(4, of: 1)), action("b", .completeStage(5, of: 1))])
        var text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""server_failures":0"#))
        text = text.replacingOccurrences(of: #""server_failures":0"#, with: #""server_failures":9223372036854775807"#, options: [], range: text.range(of: #""server_failures":0"#))
        text = text.replacingOccurrences(of: #""server_failures":0"#, with: #""server_failures":-5"#)
        let stored = try StoredActionQueue.decode(Data(text.utf8))
        #expect(stored.map(\.serverFailures) == [QueuedAction.maxStoredServerFailures, 0])
        var random = SeededGenerator(seed: 1)
        var queue = ActionQueue(policy: ActionQueuePolicy(), actions: stored)
        guard case .send = queue.next(now: start) else { Issue.record("not sent"); return }
        _ = queue.finished(ActionQueue.outcome(for: .http(status: 500, code: nil, message: nil)), random: &random)
        #expect(queue.actions.map(\.id.rawValue) == ["b"], "the head gave up past the limit; the next keeps its place")
    }

    /// The order's creation time survives a restart as the whole milliseconds `If-Order-Created`
    /// carries (`order_created_ms`); an action without it, or stored by an earlier version, has none.
    @Test func theOrdersCreationTimeIsStoredWithTheAction() throws {
        let created = Date(timeIntervalSince1970: 1_764_910_042.123)
        let named = QueuedAction(
            id: ActionID(rawValue: "a"), action: .completeStage(4, of: 1), ifMatch: nil, orderCreatedAt: created,
            queuedAt: start)
        let data = try StoredActionQueue.encode([named, action("b", .completeStage(5, of: 1))])
        #expect(String(decoding: data, as: UTF8.self).contains(#""order_created_ms":1764910042123"#))
        let stored = try StoredActionQueue.decode(data)
        #expect(stored.map { $0.orderCreatedAt.flatMap(HTTPOrdersAPI.milliseconds) } == [1_764_910_042_123, nil])
    }

    /// A queue stored while its head is being sent says the head may have been applied: an app
    /// killed mid-send, started again past the age limit, reports it `unconfirmed`, not "not sent".
    @Test func anActionStoredWhileBeingSentComesBackMarked() throws {
        var queue = ActionQueue(policy: ActionQueuePolicy(maxAge: .seconds(3600)))
        queue.add(action("a", .completeStage(4, of: 1)))
        guard case .send = queue.next(now: start) else { Issue.record("not sent"); return }
        let stored = try StoredActionQueue.decode(StoredActionQueue.encode(queue.actions))
        #expect(stored.first?.mayHaveApplied == true)
        var restarted = ActionQueue(policy: ActionQueuePolicy(maxAge: .seconds(3600)), actions: stored)
        guard case .dropped(let dropped) = restarted.next(now: start + 3601), case .refused(let reason) = dropped.state else {
            Issue.record("not dropped"); return
        }
        #expect(reason.code == "unconfirmed")
        // Waiting and never sent: not marked.
        var fresh = ActionQueue(policy: ActionQueuePolicy())
        fresh.add(action("b", .completeStage(5, of: 1)))
        #expect(try StoredActionQueue.decode(StoredActionQueue.encode(fresh.actions)).first?.mayHaveApplied == false)
    }

    /// On `reset` every waiting action is refused, with or without `If-Match` (a restore brings the
    /// id counter back, so an order id may now name another order). The one on its way stays (it is
    /// out), but if that send ends without an answer it is not sent again: refused
    /// `history_rewound`, also after a restart (the mark is stored).
    @Test func anActionOnItsWayWhenAResetCameIsNotSentAgain() throws {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .completeStage(4, of: 1)))  // no If-Match: marked all the same
        queue.add(action("b", .completeStage(5, of: 1)))
        queue.add(action("c", .completeStage(6, of: 1), ifMatch: "\"o1-v2\""))
        queue.add(action("d", .changeStatus(of: 2, to: .accepted), ifMatch: "*"))
        _ = queue.next(now: start)
        #expect(queue.historyRewound().map(\.id.rawValue) == ["b", "c", "d"], "the one on its way stays until its send ends")
        guard case .retry = queue.finished(.retry(countsAsServerFailure: false), random: &random) else {
            Issue.record("not retried")
            return
        }
        queue.backoffElapsed()
        let restarted = try StoredActionQueue.decode(StoredActionQueue.encode(queue.actions))
        for var candidate in [queue, ActionQueue(policy: ActionQueuePolicy(), actions: restarted)] {
            guard case .dropped(let dropped) = candidate.next(now: start) else { Issue.record("sent again"); return }
            #expect(dropped.id.rawValue == "a")
            #expect(dropped.state == .refused(ActionQueue.rewound))
            #expect(candidate.next(now: start) == .idle)
        }
        // An action made after the `reset` goes as usual.
        queue.add(action("e", .completeStage(7, of: 1)))
        guard case .dropped = queue.next(now: start), case .send(let next) = queue.next(now: start) else {
            Issue.record("e not sent")
            return
        }
        #expect(next.id.rawValue == "e")
    }

    /// An action a send of which may have been applied (no answer came) is refused after a `reset`
    /// as `unconfirmed`, "check the order", not `history_rewound`'s "do this again", which would
    /// apply it twice: waiting when the reset came, or on its way and ending without an answer.
    @Test func anActionThatMayHaveBeenAppliedIsRefusedAsUnconfirmedAfterAReset() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .attachDocument(name: "pod.pdf", kind: "pod", to: 1)))
        queue.add(action("b", .completeStage(5, of: 1)))
        _ = queue.next(now: start)
        _ = queue.finished(.retry(countsAsServerFailure: false, mayHaveApplied: true), random: &random)  // no answer
        let dropped = queue.historyRewound()
        #expect(dropped.map(\.id.rawValue) == ["a", "b"])
        #expect(dropped.map(\.state) == [.refused(ActionQueue.rewoundMayHaveApplied), .refused(ActionQueue.rewound)])
        #expect(ActionQueue.rewoundMayHaveApplied.code == "unconfirmed")

        queue.backoffElapsed()
        queue.add(action("c", .attachDocument(name: "pod.pdf", kind: "pod", to: 2)))
        _ = queue.next(now: start)
        #expect(queue.historyRewound().isEmpty, "on its way: it stays")
        _ = queue.finished(.retry(countsAsServerFailure: false, mayHaveApplied: true), random: &random)
        queue.backoffElapsed()
        guard case .dropped(let c) = queue.next(now: start) else {
            Issue.record("sent again")
            return
        }
        #expect(c.state == .refused(ActionQueue.rewoundMayHaveApplied))
    }

    @Test func wakingCutsABackoffShortAndAnInterruptedSendWaitsAgain() {
        var queue = ActionQueue(policy: ActionQueuePolicy())
        var random = SeededGenerator(seed: 1)
        queue.add(action("a", .changeStatus(of: 1, to: .accepted)))
        _ = queue.next(now: start)
        _ = queue.finished(.retry(countsAsServerFailure: false), random: &random)
        let cutShort = queue.wake()
        #expect(cutShort)
        let step = queue.next(now: start)
        #expect(step != .idle)
        queue.interrupted()
        #expect(queue.actions.first?.state == .waiting)
        #expect(queue.actions.first?.mayHaveApplied == true, "its answer will never be read")
        let late = queue.finished(.applied(saved(1, version: 2)), random: &random)
        #expect(late == .none, "a late answer is ignored")
    }

    @Test func theStoredQueueRoundTripsAndComesBackWaiting() throws {
        var sending = action(
            "a", .attachDocument(name: "POD.pdf", kind: "proof_of_delivery", to: 3), ifMatch: "\"o3-v2\"")
        sending.state = .sending
        let data = try StoredActionQueue.encode([sending, action("b", .completeStage(4, of: 3), at: 5)])
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.contains(#""action":"document""#) && text.contains(#""format":1"#))
        let loaded = try StoredActionQueue.decode(data)
        #expect(loaded.map(\.id.rawValue) == ["a", "b"])
        #expect(loaded[0].action == .attachDocument(name: "POD.pdf", kind: "proof_of_delivery", to: 3))
        #expect(loaded[0].ifMatch == "\"o3-v2\"" && loaded[0].state == .waiting)
        #expect(loaded[1].queuedAt == start + 5)
    }

    @Test func driverActionsDecodeFromTheCommandSyntaxAndRejectUnknownOnes() throws {
        let decoder = JSONDecoder()
        let status = try decoder.decode(
            DriverAction.self, from: Data(#"{"action":"status","order":42,"status":"accepted"}"#.utf8))
        #expect(status == .changeStatus(of: 42, to: .accepted))
        let stage = try decoder.decode(
            DriverAction.self, from: Data(#"{"action":"complete_stage","order":42,"stage":3}"#.utf8))
        #expect(stage == .completeStage(3, of: 42))
        #expect(throws: DecodingError.self) {
            try decoder.decode(DriverAction.self, from: Data(#"{"action":"teleport","order":42}"#.utf8))
        }
    }

    @Test func keysAreRandomPrintableAndDistinct() {
        var random = SeededGenerator(seed: 9)
        let keys = (0..<100).map { _ in ActionID.random(using: &random).rawValue }
        #expect(Set(keys).count == 100)
        #expect(keys.allSatisfy { $0.count == 32 && $0.allSatisfy(\.isHexDigit) })
    }
}
