import Synchronization
import WaybillBroker
import WaybillDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The broker's subscriber thread: one hiredis context SUBSCRIBEd to the channel, fanning every
/// batch out to all live subscriptions (`SubscriptionFanOut`).
///
/// The thread starts with the first subscription and runs until `stop()`. Its loop follows the
/// measured recipe (notes §7): `poll` the socket and the wake pipe for up to 200 ms,
/// `redisBufferRead` when readable, hand on the complete replies, PING every second and reconnect
/// after 2 s of silence while a PING has waited a whole second (`RedisHeartbeat`). Blocking reads
/// with `redisSetTimeout` as a tick are not an option: a timed-out read leaves the context dead
/// (notes §7). On a drop it yields
/// `.lost`, reconnects with `ReconnectBackoff`, SUBSCRIBEs, then yields `.subscribed`.
///
/// The thread does nothing but read, decode once and hand off to unbounded streams: their one
/// consumer, the hub feed's forwarder, moves each delivery at once into the feed's bounded queue
/// (docs/HARDENING.md, item 3), so they stay short.
final class RedisSubscriber: Sendable {
    private let settings: RedisSettings
    private let log: RedisLog
    let fanOut = SubscriptionFanOut()
    private let wake: WakePipe
    private let isStopping = Atomic<Bool>(false)
    private let thread = Mutex<JoinableThread?>(nil)
    /// Unreadable messages not logged yet, and when one was last logged: one line a second at
    /// most, with the count of those in between (a flood of them, or a newer node's format during
    /// a rolling upgrade at hundreds of batches a second, filled the log; a review, 2026-12-05).
    private let skipLog = Mutex<(unlogged: Int, last: ContinuousClock.Instant?)>((0, nil))

    init(settings: RedisSettings, log: RedisLog) throws(BrokerError) {
        self.settings = settings
        self.log = log
        do throws(WakePipeError) { wake = try WakePipe() } catch {
            throw BrokerError("cannot create a wake pipe (errno \(error.code))")
        }
    }

    /// A new subscription; starts the thread the first time.
    func subscribe() -> AsyncStream<BrokerDelivery> {
        let stream = fanOut.makeStream()
        thread.withLock { thread in
            guard thread == nil, !isStopping.load(ordering: .acquiring) else { return }
            do throws(JoinableThreadError) {
                thread = try JoinableThread { [self] in run() }
            } catch {
                log(.warning, "redis subscriber thread failed to start", ["errno": "\(error.code)"])
            }
        }
        return stream
    }

    /// Stops the thread (at most a connect or command timeout if it is inside one), waits for it,
    /// and ends every subscription. Idempotent.
    func stop() {
        isStopping.store(true, ordering: .releasing)
        wake.wake()
        let running = thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        if let running, !running.isCurrent { running.join() }
        fanOut.finishAll()
    }

    private var stopping: Bool { isStopping.load(ordering: .acquiring) }

    // MARK: The thread

    private func run() {
        var backoff = ReconnectBackoff()
        var isFailing = false
        while !stopping {
            let connection: RedisConnection
            do throws(BrokerError) {
                connection = try connectAndSubscribe()
            } catch {
                if !isFailing {
                    log(.warning, "redis subscribe failed", ["redis.error": error.message])
                    isFailing = true
                }
                if !pause(for: backoff.nextDelay()) { break }
                continue
            }
            isFailing = false
            log(.info, "redis subscribed", ["redis.channel": settings.channel])
            fanOut.subscribed()
            let subscribedAt = ContinuousClock.now
            let ending = listen(on: connection)
            fanOut.lost()
            // The delays start over only after a subscription that lasted: one cut off right after
            // SUBSCRIBE (Redis's output limit on a burst, a proxy that drops it) would otherwise be
            // retried every 100 ms, each time a `.lost` + `.subscribed` and a store read on every feed.
            if ContinuousClock.now - subscribedAt >= settings.heartbeatTimeout { backoff.reset() }
            guard let reason = ending else { break }
            log(.warning, "redis subscription lost", ["redis.error": reason])
            if !pause(for: backoff.nextDelay()) { break }
        }
    }

    private func connectAndSubscribe() throws(BrokerError) -> RedisConnection {
        let connection = try RedisConnection(
            settings.url, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
        let reply = try connection.command([Array("SUBSCRIBE".utf8), Array(settings.channel.utf8)])
        guard case .array(let items) = reply, items.first?.text == "subscribe" else {
            throw BrokerError("unexpected SUBSCRIBE reply: \(String(describing: reply).prefix(120))")
        }
        return connection
    }

    /// Reads until the connection fails (returns why) or the broker stops (returns nil).
    private func listen(on connection: RedisConnection) -> String? {
        var heartbeat = RedisHeartbeat(
            now: .now, interval: settings.heartbeatInterval, timeout: settings.heartbeatTimeout)
        /// Hands on every complete reply the reader holds; each one proves the connection alive.
        func drain() throws(BrokerError) {
            while let reply = try connection.bufferedReply() {
                heartbeat.heard(at: .now)
                if Self.isUnsubscribe(reply) {
                    // Nobody here asked for it (the subscriber never unsubscribes; it closes): the
                    // server, or a proxy, ended the subscription, and the connection would go on
                    // answering PINGs with nothing delivered until the feeds' silent-broker rule
                    // (about 10 s). Resubscribe now (a review, 2026-12-05).
                    throw BrokerError("unsubscribed by the server")
                }
                handle(reply)
            }
        }
        do throws(BrokerError) {
            try drain()  // anything that came with the SUBSCRIBE reply
            while true {
                if stopping { return nil }
                var fds = [
                    pollfd(fd: connection.fileDescriptor, events: Int16(POLLIN), revents: 0),
                    pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0),
                ]
                let ready = poll(&fds, 2, Duration.milliseconds(200).pollMilliseconds)
                // Silence is judged as of this look at the socket: a stall between here and the
                // check must not count what arrived meanwhile, unread, as missing.
                let lookedAt = ContinuousClock.now
                if ready < 0 && errno != EINTR { return "poll failed (errno \(errno))" }
                if fds[1].revents != 0 { wake.drain() }
                if stopping { return nil }
                if fds[0].revents != 0 {
                    try connection.readAvailable()
                    // Bytes arrived (an end of stream throws above): the connection is alive, also
                    // while a large message is still on its way. Only whole replies counted, and a
                    // message over the heartbeat's 2 s in transit made the subscriber resubscribe
                    // in its middle, over and over (a review, 2026-12-05).
                    heartbeat.heard(at: lookedAt)
                    try drain()  // what was read counts before the silence is judged
                }
                switch heartbeat.check(at: lookedAt) {
                case .none: break
                case .ping:
                    try connection.append([Array("PING".utf8)])
                    try connection.flush()
                case .reconnect:
                    return "no reply to PING within \(settings.heartbeatTimeout)"
                }
            }
        } catch {
            return error.message
        }
    }

    /// An `unsubscribe` push (`["unsubscribe", channel, count]`).
    static func isUnsubscribe(_ reply: RedisReply) -> Bool {
        guard case .array(let items) = reply else { return false }
        return items.first?.text == "unsubscribe"
    }

    /// `["message", channel, payload]` → decode once, deliver; pongs and subscribe confirmations
    /// only prove the connection alive. A payload that does not decode is logged and skipped: one bad
    /// publisher must not stop delivery. The consumers hear `.skipped` and read the store at once:
    /// they noticed only at the next batch's id gap or their 5 s check, so while a newer node led
    /// a rolling upgrade every older node delivered in bursts up to 5 s late (found by a review,
    /// 2026-12-05).
    private func handle(_ reply: RedisReply) {
        guard case .array(let items) = reply, let kind = items.first?.text else {
            if case .error(let message) = reply { log(.warning, "redis error reply", ["redis.error": message]) }
            return
        }
        guard kind == "message", items.count == 3, case .bulk(let payload) = items[2] else { return }
        do {
            let events = try BrokerWireFormat.decode(payload)
            if !events.isEmpty { fanOut.deliver(events) }
        } catch {
            let now = ContinuousClock.now
            let skipped = skipLog.withLock { state -> Int? in
                state.unlogged += 1
                if let last = state.last, now - last < .seconds(1) { return nil }
                defer { state = (0, now) }
                return state.unlogged
            }
            if let skipped {
                log(.warning, "redis batch skipped", ["redis.error": "\(error)", "bytes": "\(payload.count)", "skipped": "\(skipped)"])
            }
            fanOut.skipped()
        }
    }

    /// Sleeps for `delay` unless woken to stop; false when stopping.
    private func pause(for delay: Duration) -> Bool {
        let deadline = ContinuousClock.now + delay
        while !stopping {
            let left = deadline - .now
            if left <= .zero { return true }
            var fd = pollfd(fd: wake.readEnd, events: Int16(POLLIN), revents: 0)
            if poll(&fd, 1, max(left.pollMilliseconds, 1)) > 0 { wake.drain() }
        }
        return false
    }
}
