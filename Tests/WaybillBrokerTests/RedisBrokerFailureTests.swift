import Foundation
import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillRedis
import WaybillTesting

/// What the Redis broker does when Redis crashes, hangs, comes back, or carries garbage.
///
/// Serialized: several tests bound how long a frozen Redis may hold a call, and three of them
/// freezing, killing and flooding their servers at once on a 2-core machine pushed one past its bound.
@Suite(.serialized, .timeLimit(.minutes(1)))
struct RedisBrokerFailureTests {
    @Test func killedRedisIsReportedAndPublishFailsFast() async throws {
        try await withRedisBroker { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            try await broker.publish([event(1)])
            // Delivered before the kill: a publish returns once Redis has it, and a Redis killed
            // right after may never push it to the subscriber (failed once so, after 61 ms).
            #expect(await subscription.waitForEvents(1))

            redis.kill()
            #expect(await subscription.wait(timeout: .seconds(3)) { $0.last == .lost })
            for _ in 0..<3 {
                let started = ContinuousClock.now
                await #expect(throws: BrokerError.self) { try await broker.publish([event(2)]) }
                #expect(ContinuousClock.now - started < .seconds(2))
            }
            #expect(subscription.deliveries == [.subscribed, .events([event(1)]), .lost])
        }
    }

    /// A PUBLISH answered with neither a count nor an error (a proxy or a look-alike in front of
    /// Redis; Redis never does) drops the connection: its later replies could answer other
    /// commands. It was kept, and the next PUBLISH went out on it (a review, 2026-12-05).
    @Test func anUnexpectedPublishReplyDropsTheConnection() async throws {
        try await Self.withLookAlike(.okToEverything) { lookAlike, broker in
            await #expect(throws: BrokerError.self) { try await broker.publish([event(1)]) }
            try await Task.sleep(for: .milliseconds(400))  // past the first retry delay (100 ms)
            await #expect(throws: BrokerError.self) { try await broker.publish([event(2)]) }
            #expect(lookAlike.connections == 2, "each PUBLISH on a fresh connection")
        }
    }

    /// A broker on a Redis look-alike answering as `mode` says; both stopped after `body`.
    static func withLookAlike(
        _ mode: LookAlikeRedis.Mode, _ body: (LookAlikeRedis, RedisBroker) async throws -> Void
    ) async throws {
        let lookAlike = try LookAlikeRedis(mode: mode)
        defer { lookAlike.stop() }
        let broker = try RedisBroker(url: "redis://127.0.0.1:\(lookAlike.port)")
        defer { broker.close() }
        try await body(lookAlike, broker)
    }

    /// A message still arriving after the heartbeat's 2 s (tens of MB on a slow link; here a
    /// look-alike that sends one over 3.5 s, answering no PING meanwhile, as Redis answers after
    /// the message) keeps the subscription: bytes arriving are a sign of life. Only whole replies
    /// counted, and the subscriber resubscribed in the message's middle (a review, 2026-12-05).
    @Test func aMessageSlowerThanTheHeartbeatKeepsTheSubscription() async throws {
        try await Self.withLookAlike(.trickle) { lookAlike, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            #expect(await subscription.wait(timeout: .seconds(10)) { $0.contains(.events([event(7)])) }, "the slow message arrives")
            #expect(lookAlike.connections == 1, "no resubscribe while it arrived")
            #expect(!subscription.deliveries.contains(.lost))
        }
    }

    /// An `unsubscribe` nobody asked for (the server's or a proxy's) makes the subscriber
    /// subscribe again at once: it stayed on a connection that answered PINGs and delivered
    /// nothing, until the feeds' silent-broker rule about 10 s later (a review, 2026-12-05).
    @Test func anUnsolicitedUnsubscribeSubscribesAgain() async throws {
        try await Self.withLookAlike(.unsubscribeFirst) { lookAlike, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            // The look-alike sends the message only on a connection after its first: within 5 s,
            // half the silent-broker rule's 10 s, the subscriber must have left the first one.
            #expect(await subscription.wait(timeout: .seconds(5)) { $0.contains(.events([event(7)])) })
            // At least two: on a busy runner (clean-clone CI, 2026-12-07) three were counted by
            // then, one more reconnect than this case makes (not traced; a 2 s heartbeat missed
            // under load would make it).
            #expect(lookAlike.connections >= 2)
        }
    }

    /// hiredis writes with plain `write()`: a multi-megabyte PUBLISH into a dead connection raised
    /// SIGPIPE and killed the process in the notes (§1). The broker ignores SIGPIPE, so this throws.
    @Test func largePublishToAKilledRedisThrowsInsteadOfKillingTheProcess() async throws {
        try await withRedisBroker { redis, broker in
            try await broker.publish([event(1)])  // the publisher's connection is open now
            redis.kill()
            let large = (1...30_000).map { event(Int64($0)) }
            await #expect(throws: BrokerError.self) { try await broker.publish(large) }
        }
    }

    /// The publisher's connection, dropped while idle (here by Redis's own `timeout`; in production
    /// also by a NAT or load balancer on the way), is replaced before the next PUBLISH: that publish
    /// failed (after the command timeout, when the drop was silent), the relay counted a failure,
    /// and the event reached every socket a second late.
    @Test func aPublishAfterAnIdleSpellDoesNotFailOnAConnectionDroppedMeanwhile() async throws {
        try await withRedisBroker(opening: { try RedisBroker(url: $0, publisherIdleReconnect: .milliseconds(500)) }) {
            redis, broker in
            _ = try await runBlocking { try redis.command(["CONFIG", "SET", "timeout", "1"].map { Array($0.utf8) }) }
            let subscription = try await deliveringSubscription(broker)  // publishes event(1)
            // Redis closes a client idle for more than 1 s (pub/sub subscribers excepted).
            #expect(await eventually(timeout: .seconds(10)) {
                let clients = (try? await runBlocking { try redis.bulkCommand(["CLIENT", "LIST"]) }) ?? "cmd=publish"
                return !clients.contains("cmd=publish")
            }, "Redis dropped the idle publisher connection")
            try await broker.publish([event(2)])
            #expect(await subscription.waitForEvents(2))
            #expect(subscription.deliveries == [.subscribed, .events([event(1)]), .events([event(2)])])
        }
    }

    @Test func restartedRedisIsSubscribedAgainAndDeliversNewBatches() async throws {
        try await withRedisBroker { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            redis.kill()
            #expect(await subscription.wait(timeout: .seconds(3)) { $0.last == .lost })
            await #expect(throws: BrokerError.self) { try await broker.publish([event(1)]) }

            try await runBlocking { try redis.start() }
            #expect(await subscription.waitForSubscribed(count: 2, timeout: .seconds(5)))
            #expect(try await publishUntilAccepted(broker, [event(2)], timeout: .seconds(5)))
            #expect(await subscription.waitForEvents(1))
            #expect(subscription.deliveries == [.subscribed, .lost, .subscribed, .events([event(2)])])
        }
    }

    /// A hung Redis still accepts TCP connections; only the timeouts and the heartbeat notice it.
    @Test func frozenRedisFailsPublishWithinTheCommandTimeoutAndRecoversOnThaw() async throws {
        let opening = { (url: String) in try RedisBroker(url: url, commandTimeout: .milliseconds(500)) }
        try await withRedisBroker(opening: opening) { redis, broker in
            let subscription = try await deliveringSubscription(broker)

            redis.freeze()
            // Should the command bound ever fail, the publish would wait for the thaw: a watchdog
            // thaws Redis after 15 s, so the test then fails instead of hanging.
            let watchdog = Task.detached {
                try await Task.sleep(for: .seconds(15))
                redis.thaw()
            }
            defer { watchdog.cancel() }
            let started = ContinuousClock.now
            await #expect(throws: BrokerError.self) { try await broker.publish([event(2)]) }
            // Bounded (500 ms, plus a busy runner's delays), not blocked until the thaw.
            #expect(ContinuousClock.now - started < .seconds(5))
            #expect(await subscription.wait(timeout: .seconds(10)) { $0.last == .lost })

            redis.thaw()
            #expect(await subscription.waitForSubscribed(count: 2, timeout: .seconds(6)))
            #expect(try await publishUntilAccepted(broker, [event(3)], timeout: .seconds(5)))
            #expect(await subscription.wait { $0.last == .events([event(3)]) })
        }
    }

    /// A publish abandoned while it waits behind one Redis is slow to take (the relay's timeout
    /// cancels it) is taken out of the queue: it throws at once and is never sent later.
    @Test func aCancelledPublishStillQueuedIsNeverSent() async throws {
        // The first publish holds the thread until the thaw (10 s at most), so "before the first
        // publish ended" can be told apart with a bound loose enough for a loaded 2-core machine.
        let opening = { (url: String) in try RedisBroker(url: url, commandTimeout: .seconds(10)) }
        try await withRedisBroker(opening: opening) { redis, broker in
            let subscription = try await deliveringSubscription(broker)
            // Every message on the channel, seen by a subscriber without a heartbeat (the broker's
            // own may drop during the freeze and miss a batch sent meanwhile).
            let channel = broker.channel, port = redis.port
            let witness = try await runBlocking { try RawSubscriber(port: port, channel: channel) }

            redis.freeze()
            let first = Task { try await broker.publish([event(2)]) }  // the thread waits on Redis with it
            try await Task.sleep(for: .milliseconds(100))
            let second = Task { try await broker.publish([event(3)]) }  // queued behind it
            try await Task.sleep(for: .milliseconds(100))
            let cancelledAt = ContinuousClock.now
            second.cancel()
            await #expect(throws: BrokerError.self) { try await second.value }
            #expect(ContinuousClock.now - cancelledAt < .seconds(5), "not after the first publish")
            redis.thaw()
            _ = try? await first.value  // taken once thawed (or timed out on a slow machine: either is fine)
            // The subscription may have dropped during the freeze (its heartbeat): publish until it sees 4.
            let deadline = ContinuousClock.now + .seconds(10)
            while !subscription.deliveries.contains(.events([event(4)])), ContinuousClock.now < deadline {
                _ = try? await broker.publish([event(4)])
                _ = await subscription.wait(timeout: .milliseconds(300)) { $0.contains(.events([event(4)])) }
            }
            #expect(subscription.deliveries.contains(.events([event(4)])))
            // Everything published up to the first `event(4)`, in order: `event(3)` never went out.
            let seen = try await runBlocking { try witness.batches(through: 4) }
            #expect(seen.last == [event(4)])
            #expect(!seen.contains([event(3)]), "the cancelled batch went out: \(seen)")
        }
    }

    /// A subscription cut off right after SUBSCRIBE, again and again, is retried with growing
    /// delays: the delays start over only after a subscription that lasted.
    @Test func aSubscriptionDroppedRightAfterSubscribingBacksOff() async throws {
        try await withRedisBroker { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            let killing = Task.detached {
                let deadline = ContinuousClock.now + .seconds(3)
                while ContinuousClock.now < deadline {
                    _ = try? redis.command(["CLIENT", "KILL", "TYPE", "pubsub"].map { Array($0.utf8) })
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            await killing.value
            let resubscribed = subscription.deliveries.filter { $0 == .subscribed }.count - 1
            // 100 ms doubling (100, 200, 400, 800, 1 600 ms): at most 5 in 3 s; every 100 ms: about 25.
            #expect(resubscribed >= 2 && resubscribed <= 7, "\(resubscribed) subscriptions in 3 s")
            // And it still comes back once left alone: its last word is `.subscribed`. (Not "one more
            // `.subscribed`": the last retry may have succeeded after the last kill, before the count
            // above was taken; a clean-clone CI run waited 5 s for a subscription that was up.)
            let back = await subscription.wait(timeout: .seconds(5)) { $0.last == .subscribed }
            #expect(back, "\(subscription.deliveries.suffix(3))")
        }
    }

    @Test func garbageOnTheChannelIsSkippedAndLaterBatchesArrive() async throws {
        let warnings = Mutex<[String]>([]), counts = Mutex<[String]>([])
        let opening = { (url: String) in
            try RedisBroker(url: url) { level, message, fields in
                if level == .warning { warnings.withLock { $0.append(message) } }
                if message == "redis batch skipped" { counts.withLock { $0.append(fields["skipped"] ?? "none") } }
            }
        }
        try await withRedisBroker(opening: opening) { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())

            let hostile: [[UInt8]] = [
                [], [0, 0xff, 0xfe, 10, 13], Array("not json".utf8), Array("{\"v\":1,\"events\":[{}]}".utf8),
                Array("{\"v\":99,\"events\":[]}".utf8), Array(String(repeating: "[", count: 50_000).utf8),
                [UInt8](repeating: 0x41, count: 1 << 20),
            ]
            for payload in hostile { #expect(try redis.publish(payload, on: broker.channel) == 1) }
            try await broker.publish([event(5)])

            #expect(await subscription.waitForEvents(1))
            // Each unreadable message is said (`.skipped`: the consumers read the store at once).
            let skipped = Array(repeating: BrokerDelivery.skipped, count: hostile.count)
            #expect(subscription.deliveries == [.subscribed] + skipped + [.events([event(5)])])
            // Logged once a second at most, with a count (a flood filled the log a line each).
            let logged = warnings.withLock { $0.filter { $0 == "redis batch skipped" }.count }
            #expect(logged >= 1 && logged < hostile.count, "\(logged) lines for \(hostile.count) messages")
            // Each line counts the messages skipped since the one before, its own included.
            let said = counts.withLock { $0 }
            #expect(said.first == "1", "\(said)")
            #expect(said.compactMap { Int($0) }.reduce(0, +) <= hostile.count, "\(said)")
        }
    }

    /// A stall of our own subscriber thread longer than the heartbeat's 2 s timeout keeps the
    /// subscription. The stall is real: the log hook of a skipped batch holds the thread for 2.6 s.
    /// The old heartbeat judged the stall as Redis's silence and dropped the subscription
    /// (`.lost`, `.subscribed`), with whatever had come meanwhile unread.
    ///
    /// Nothing arrives after the stall here, so the first look at the socket after it finds it
    /// quiet: only the rule "ping first when no PING was out" keeps the subscription.
    @Test func aStallOfTheSubscriberWithNothingAfterItKeepsTheSubscription() async throws {
        let stall = SubscriberStall()
        try await withRedisBroker(opening: stall.opening) { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            #expect(try redis.publish(Array("not json".utf8), on: broker.channel) == 1)
            #expect(await eventually { stall.hasEnded })
            // The old rule reconnected at the first check after the stall, within 0.2 s; the new one
            // pings and hears the answer. 1.5 s is longer than a PING's whole allowance.
            try await Task.sleep(for: .milliseconds(1500))
            #expect(subscription.deliveries == [.subscribed, .skipped])  // the unreadable message
            try await broker.publish([event(5)])
            #expect(await subscription.waitForEvents(1))
            #expect(subscription.deliveries == [.subscribed, .skipped, .events([event(5)])])
        }
    }

    /// The same stall with a batch published while it holds: the batch waits in the socket and is
    /// delivered after it, on the same subscription. (Either the ping-first rule or judging the
    /// silence as of the last look at the socket keeps it here; the test above needs the rule.)
    @Test func aStallOfTheSubscriberWithABatchMeanwhileKeepsTheSubscription() async throws {
        let stall = SubscriberStall()
        try await withRedisBroker(opening: stall.opening) { redis, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            #expect(try redis.publish(Array("not json".utf8), on: broker.channel) == 1)
            #expect(await eventually { stall.hasStarted })
            try await broker.publish([event(5)])  // reaches the socket while the thread is held

            #expect(await subscription.waitForEvents(1))
            #expect(subscription.deliveries == [.subscribed, .skipped, .events([event(5)])])
        }
    }

    @Test func closeEndsSubscriptionsAndLaterPublishesThrow() async throws {
        // The helper's own close afterwards is a no-op: `close()` is idempotent.
        try await withRedisBroker { _, broker in
            let subscription = DeliveryCollector(broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            try await broker.publish([event(1)])

            broker.close()
            #expect(await subscription.wait { _ in subscription.isFinished })
            await #expect(throws: BrokerError("redis broker is closed")) { try await broker.publish([event(2)]) }
            #expect(broker.subscriptionCount == 0)
            let afterClose = DeliveryCollector(broker.subscribe())
            #expect(await afterClose.wait { _ in afterClose.isFinished })
            #expect(afterClose.deliveries.isEmpty)
        }
    }

    /// Dropping the last reference closes the broker: its threads stop and its streams end.
    @Test func releasedBrokerEndsItsSubscriptions() async throws {
        let redis = try await runBlocking { try RedisServer() }
        var broker: RedisBroker? = try RedisBroker(url: redis.url)
        let subscription = DeliveryCollector(broker!.subscribe())
        #expect(await subscription.waitForSubscribed())
        broker = nil  // closes it: joins its threads (quick when Redis is up)
        #expect(await subscription.wait { _ in subscription.isFinished })
        _ = try? await runBlocking { redis.stop() }
    }

    @Test func cancelledSubscriptionIsUnregistered() async throws {
        try await withRedisBroker { _, broker in
            let leaving = DeliveryCollector(broker.subscribe())
            let staying = DeliveryCollector(broker.subscribe())
            #expect(await staying.waitForSubscribed())
            #expect(broker.subscriptionCount == 2)
            leaving.cancel()
            #expect(await staying.wait { _ in broker.subscriptionCount == 1 })
        }
    }

    /// A broker whose Redis never ran: publish fails fast, the subscription waits without `.subscribed`.
    @Test func downRedisAtStartupFailsPublishesQuickly() async throws {
        let url = try await runBlocking { () throws -> String in
            let redis = try RedisServer()
            defer { redis.stop() }
            return redis.url
        }
        let broker = try RedisBroker(url: url)
        defer { broker.close() }
        let subscription = DeliveryCollector(broker.subscribe())
        let started = ContinuousClock.now
        for _ in 0..<20 {
            await #expect(throws: BrokerError.self) { try await broker.publish([event(1)]) }
        }
        // A publish that waited out its 1 s connect timeout would make these 20 take 20 s; a refused
        // connect fails at once. 5 s leaves room for a loaded machine (it took 1.75 s next to builds).
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(await subscription.wait(timeout: .milliseconds(300)) { !$0.isEmpty } == false)
    }
}

/// Holds the subscriber thread 2.6 s, once: in the log hook of the first skipped batch.
private final class SubscriberStall: Sendable {
    private let state = Mutex((started: false, ended: false))
    var hasStarted: Bool { state.withLock { $0.started } }
    var hasEnded: Bool { state.withLock { $0.ended } }

    /// A broker whose log hook stalls. Generous connect and command bounds: the tests' publishes
    /// are not about them.
    func opening(_ url: String) throws -> RedisBroker {
        try RedisBroker(url: url, connectTimeout: .seconds(5), commandTimeout: .seconds(10)) { [self] _, message, _ in
            guard message == "redis batch skipped", state.withLock({ state in
                defer { state.started = true }
                return !state.started
            }) else { return }
            Thread.sleep(forTimeInterval: 2.6)
            state.withLock { $0.ended = true }
        }
    }
}

/// Runs `body` with a fresh Redis and a broker on it (`opening` makes it from the server's URL), then
/// closes the broker and stops the server, however `body` ends.
/// The default broker has generous connect and command bounds (as `withBrokerFixture`'s): with the
/// production 1 s, a test's publish failed when a busy runner held Redis back for a second.
private func withRedisBroker(
    opening: (String) throws -> RedisBroker = { try RedisBroker(url: $0, connectTimeout: .seconds(5), commandTimeout: .seconds(10)) },
    _ body: (RedisServer, RedisBroker) async throws -> Void
) async throws {
    // Off the cooperative pool: starting a server waits until it answers, and closing joins the
    // broker's threads (see `withBrokerFixture`).
    let redis = try await runBlocking { try RedisServer() }
    let result = await outcome {
        let broker = try opening(redis.url)
        let result = await outcome { try await body(redis, broker) }
        _ = try? await runBlocking { broker.close() }
        try result.get()
    }
    _ = try? await runBlocking { redis.stop() }
    try result.get()
}

/// A subscription that is up and has delivered one batch (`event(1)`).
func deliveringSubscription(_ broker: RedisBroker) async throws -> DeliveryCollector {
    let subscription = DeliveryCollector(broker.subscribe())
    #expect(await subscription.waitForSubscribed())
    try await broker.publish([event(1)])
    #expect(await subscription.waitForEvents(1))
    return subscription
}

/// A small committed event.
func event(_ id: Int64) -> StoredEvent {
    StoredEvent(
        id: EventID(id),
        event: OrderEvent(
            type: .statusChanged, companyID: 1, orderID: OrderID(id + 100), number: "N-\(id)", oldStatus: .assigned,
            newStatus: .accepted, driverID: 9, changedAt: BrokerWireFormat.date(milliseconds: 1_764_547_200_000 + id),
            groups: [.company(1), .driver(9)]),
        committedAt: BrokerWireFormat.date(milliseconds: 1_764_547_200_100 + id))
}

/// Publishes until Redis takes the batch (the publisher backs off after failures) or `timeout` passes.
func publishUntilAccepted(_ broker: RedisBroker, _ batch: [StoredEvent], timeout: Duration) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        do {
            try await broker.publish(batch)
            return true
        } catch is BrokerError {
            try await Task.sleep(for: .milliseconds(50))
        }
    }
    return false
}

/// A plain SUBSCRIBE connection (no heartbeat: a frozen Redis does not make it give up), for
/// checking what was published on a channel.
private final class RawSubscriber: @unchecked Sendable {
    private let connection: RawConnection

    init(port: Int, channel: String) throws {
        connection = try RawConnection(port: port, timeout: .seconds(30))
        try connection.send(RedisServer.request(["SUBSCRIBE", channel].map { Array($0.utf8) }))
        _ = try readArray()  // ["subscribe", channel, 1]
    }

    /// The batches published, decoded, up to and including the first whose last id is `id`.
    func batches(through id: Int64) throws -> [[StoredEvent]] {
        var batches: [[StoredEvent]] = []
        while batches.last?.last?.id != EventID(id) {
            let message = try readArray()
            guard message.count == 3, String(decoding: message[0], as: UTF8.self) == "message" else { continue }
            batches.append(try BrokerWireFormat.decode(message[2]))
        }
        return batches
    }

    private func readArray() throws -> [[UInt8]] {
        let head = try connection.readLine()
        guard head.hasPrefix("*"), let count = Int(head.dropFirst()) else { throw RawConnectionError.closed }
        return try (0..<count).map { _ in
            let item = try connection.readLine()
            if item.hasPrefix(":") { return Array(item.dropFirst().utf8) }
            guard item.hasPrefix("$"), let length = Int(item.dropFirst()) else { throw RawConnectionError.closed }
            let bytes = try connection.readBytes(length)
            _ = try connection.readLine()
            return bytes
        }
    }

}

/// A TCP server on 127.0.0.1 that answers whatever it reads with `+OK` (a simple string), as no
/// Redis answers PUBLISH: a stand-in for a proxy or look-alike in front of Redis. Counts the
/// connections it accepted.
final class LookAlikeRedis: @unchecked Sendable {  // fd and the thread are set up before start
    let port: Int
    private let fd: Int32
    private let accepted = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    /// Signalled when the accept loop has ended: only then is the descriptor closed (a number
    /// closed under a running loop could be another test's socket by its next `accept`).
    private let ended = DispatchSemaphore(value: 0)

    var connections: Int { accepted.load(ordering: .acquiring) }

    enum Mode {
        /// Answers every command with `+OK`, as no Redis answers PUBLISH.
        case okToEverything
        /// Answers SUBSCRIBE as Redis does, then sends one message (`event(7)`) a few bytes every
        /// 100 ms over about 3.5 s, and answers nothing else (no PONG before it ends).
        case trickle
        /// Answers SUBSCRIBE, then on the first connection pushes an `unsubscribe` and stays
        /// silent but for PONGs; on the next, sends the message (`event(7)`).
        case unsubscribeFirst
    }
    private let mode: Mode

    init(mode: Mode = .okToEverything) throws {
        self.mode = mode
        // Its client threads may write into connections the broker already closed.
        signal(SIGPIPE, SIG_IGN)
        (fd, port) = try openLoopbackListener()
        Thread { [self] in
            serve()
            ended.signal()
        }.start()
    }

    private func serve() {
        while !stopped.load(ordering: .acquiring) {
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 50) == 1 else { continue }
            let client = accept(fd, nil, nil)
            guard client >= 0 else { continue }
            accepted.add(1, ordering: .releasing)
            switch mode {
            case .okToEverything: break
            case .trickle:
                Thread { Self.subscribe(client, thenSend: .trickled) }.start()
                continue
            case .unsubscribeFirst:
                let first = connections == 1
                Thread { Self.subscribe(client, thenSend: first ? .unsubscribe : .message) }.start()
                continue
            }
            Thread {
                var buffer = [UInt8](repeating: 0, count: 65_536)
                while read(client, &buffer, buffer.count) > 0 {
                    let ok = Array("+OK\r\n".utf8)
                    _ = ok.withUnsafeBufferPointer { write(client, $0.baseAddress, $0.count) }
                }
                close(client)
            }.start()
        }
    }

    /// RESP for `[kind, channel, payload]`.
    private static func push(_ parts: [[UInt8]]) -> [UInt8] {
        var bytes = Array("*\(parts.count)\r\n".utf8)
        for part in parts { bytes += Array("$\(part.count)\r\n".utf8) + part + Array("\r\n".utf8) }
        return bytes
    }

    private enum Follow { case trickled, unsubscribe, message }

    private static func subscribe(_ client: Int32, thenSend follow: Follow) {
        func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBufferPointer { write(client, $0.baseAddress, $0.count) } }
        var buffer = [UInt8](repeating: 0, count: 4096)
        guard read(client, &buffer, buffer.count) > 0 else {  // SUBSCRIBE
            close(client)
            return
        }
        let channel = Array("waybill:events".utf8)
        send(Array("*3\r\n$9\r\nsubscribe\r\n$\(channel.count)\r\n".utf8) + channel + Array("\r\n:1\r\n".utf8))
        let message = push([Array("message".utf8), channel, BrokerWireFormat.encode([event(7)])])
        switch follow {
        case .trickled:
            let pieces = 35
            let size = (message.count + pieces - 1) / pieces
            for start in stride(from: 0, to: message.count, by: size) {
                usleep(100_000)
                send(Array(message[start..<min(start + size, message.count)]))
            }
        case .unsubscribe:
            usleep(200_000)
            send(Array("*3\r\n$11\r\nunsubscribe\r\n$\(channel.count)\r\n".utf8) + channel + Array("\r\n:0\r\n".utf8))
        case .message:
            send(message)
        }
        // Then answer PINGs as Redis would, until the client goes.
        while read(client, &buffer, buffer.count) > 0 {
            send(Array("*2\r\n$4\r\npong\r\n$0\r\n\r\n".utf8))
        }
        close(client)
    }

    func stop() {
        stopped.store(true, ordering: .releasing)
        ended.wait()  // the accept loop polls every 50 ms
        close(fd)
    }
}
