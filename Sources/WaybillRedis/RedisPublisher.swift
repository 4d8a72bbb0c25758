import Dispatch
import Synchronization
import WaybillBroker

/// The broker's publisher thread: one hiredis context that PUBLISHes queued payloads in order.
///
/// `publish` only enqueues and awaits a continuation, so the blocking C calls never run on Swift's
/// cooperative pool. Each call is bounded: connect by `connectTimeout` (a blackholed host waits for
/// exactly that long), every socket read and write by `commandTimeout` (`redisSetTimeout` after every
/// connect: a frozen Redis accepts the TCP handshake and PUBLISH then blocked for more than 3 s
/// without it, notes §8). A NULL reply kills the context for good (sticky `err`, notes §7): it is
/// dropped and the call throws; the next call connects again. After a failure, calls fail fast for
/// `ReconnectBackoff`'s delay (100 ms doubling to 2 s) instead of each paying for a connect, so a
/// down Redis costs the relay ~nothing per attempt while it waits on the outbox.
///
/// A connection that sat idle for `publisherIdleReconnect` (30 s) is replaced before the next
/// PUBLISH: Redis's `timeout` setting, or a NAT or load balancer between the node and Redis, may
/// have dropped it silently, and the first event after a quiet spell then waited out the command
/// timeout, counted as a relay failure and reached every socket a second late (found by a review,
/// 2026-12-05). A connect on loopback or a LAN costs well under a millisecond.
final class RedisPublisher: Sendable {
    private struct Job {
        var id: UInt64
        var payload: [UInt8]
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Queue {
        var jobs: [Job] = []
        var isClosed = false
        var nextID: UInt64 = 0
    }

    private let settings: RedisSettings
    private let log: RedisLog
    private let queue = Mutex(Queue())
    /// One signal per job, plus one at close.
    private let ready = DispatchSemaphore(value: 0)
    private let thread = Mutex<JoinableThread?>(nil)

    init(settings: RedisSettings, log: RedisLog) {
        self.settings = settings
        self.log = log
    }

    /// PUBLISHes `payload` on the channel; returns once Redis has taken it (0 receivers is success:
    /// pub/sub keeps nothing, and the consumers refill from the outbox).
    /// - Throws: `BrokerError` if Redis is down, frozen, refused it, or the broker is closed.
    ///
    /// A call cancelled while its payload still waits in the queue takes it out and throws: the
    /// relay abandons a publish that timed out, and a copy sent seconds later (after the lease moved,
    /// or history rewound) would only confuse the feeds. One the thread has begun is let finish.
    func publish(_ payload: [UInt8]) async throws {
        let id = queue.withLock { queue in
            queue.nextID += 1
            return queue.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let refusal = queue.withLock { queue -> BrokerError? in
                    if queue.isClosed { return BrokerError("redis broker is closed") }
                    // Cancelled before it was queued (the handler found nothing to take out).
                    if Task.isCancelled { return BrokerError("publish cancelled") }
                    queue.jobs.append(Job(id: id, payload: payload, continuation: continuation))
                    return nil
                }
                if let refusal {
                    continuation.resume(throwing: refusal)
                    return
                }
                startIfNeeded()
                ready.signal()
            }
        } onCancel: {
            // Not found: not queued yet (the body sees the cancellation), or the thread has it.
            let waiting = queue.withLock { queue -> Job? in
                queue.jobs.firstIndex { $0.id == id }.map { queue.jobs.remove(at: $0) }
            }
            waiting?.continuation.resume(throwing: BrokerError("publish cancelled"))
        }
    }

    /// Stops the thread after the job it is on, fails what is still queued, frees the context.
    func stop() {
        queue.withLock { $0.isClosed = true }
        ready.signal()
        let running = thread.withLock { thread in
            defer { thread = nil }
            return thread
        }
        if let running, !running.isCurrent { running.join() }
        let left = queue.withLock { queue in
            defer { queue.jobs = [] }
            return queue.jobs
        }
        for job in left { job.continuation.resume(throwing: BrokerError("redis broker is closed")) }
    }

    private func startIfNeeded() {
        thread.withLock { thread in
            guard thread == nil, !queue.withLock({ $0.isClosed }) else { return }
            do throws(JoinableThreadError) {
                thread = try JoinableThread { [self] in run() }
            } catch {
                log(.warning, "redis publisher thread failed to start", ["errno": "\(error.code)"])
            }
        }
    }

    // MARK: The thread

    /// What the thread alone touches: the connection and the failure bookkeeping.
    private struct Link {
        var connection: RedisConnection?
        var backoff = ReconnectBackoff()
        var retryAt: ContinuousClock.Instant?
        var lastError = ""
        /// When the connection last carried a PUBLISH (or was opened).
        var lastUsed = ContinuousClock.now
    }

    private func run() {
        var link = Link()
        while true {
            ready.wait()
            let (job, isClosed) = queue.withLock { queue -> (Job?, Bool) in
                if queue.isClosed { return (nil, true) }
                return queue.jobs.isEmpty ? (nil, false) : (queue.jobs.removeFirst(), false)
            }
            if isClosed { break }
            guard let job else { continue }
            do throws(BrokerError) {
                try send(job.payload, over: &link)
                job.continuation.resume()
            } catch {
                job.continuation.resume(throwing: error)
            }
        }
        link.connection = nil
    }

    private func send(_ payload: [UInt8], over link: inout Link) throws(BrokerError) {
        if link.connection != nil, ContinuousClock.now - link.lastUsed >= settings.publisherIdleReconnect {
            link.connection = nil
        }
        if link.connection == nil {
            if let retryAt = link.retryAt, ContinuousClock.now < retryAt {
                throw BrokerError("redis unavailable: \(link.lastError)")
            }
            do throws(BrokerError) {
                link.connection = try RedisConnection(
                    settings.url, connectTimeout: settings.connectTimeout, commandTimeout: settings.commandTimeout)
            } catch {
                throw failed(error, &link)
            }
        }
        guard let connection = link.connection else { return }
        link.lastUsed = .now
        let reply: RedisReply
        do throws(BrokerError) {
            reply = try connection.command([Array("PUBLISH".utf8), Array(settings.channel.utf8), payload])
        } catch {
            throw failed(error, &link)
        }
        switch reply {
        case .integer:
            if link.retryAt != nil { log(.info, "redis publisher reconnected", ["redis.url": "\(settings.url)"]) }
            link.retryAt = nil
            link.backoff.reset()
        case .error(let message):
            throw BrokerError("redis refused PUBLISH: \(message)")
        default:
            // Redis answers PUBLISH with a count or an error, nothing else; what did is not Redis
            // (a proxy, a look-alike), and its next replies may belong to other commands: drop the
            // connection, as after any failure (it was kept, found by a review, 2026-12-05).
            throw failed(BrokerError("unexpected PUBLISH reply: \(String(describing: reply).prefix(120))"), &link)
        }
    }

    /// Drops the (dead) connection and schedules the next attempt.
    private func failed(_ error: BrokerError, _ link: inout Link) -> BrokerError {
        if link.retryAt == nil { log(.warning, "redis publish failed", ["redis.error": error.message]) }
        link.connection = nil
        link.lastError = error.message
        link.retryAt = .now + link.backoff.nextDelay()
        return error
    }
}
