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
final class RedisPublisher: Sendable {
    private struct Job {
        var payload: [UInt8]
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct Queue {
        var jobs: [Job] = []
        var isClosed = false
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
    func publish(_ payload: [UInt8]) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let accepted = queue.withLock { queue in
                guard !queue.isClosed else { return false }
                queue.jobs.append(Job(payload: payload, continuation: continuation))
                return true
            }
            guard accepted else {
                continuation.resume(throwing: BrokerError("redis broker is closed"))
                return
            }
            startIfNeeded()
            ready.signal()
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
            throw BrokerError("unexpected PUBLISH reply: \(String(describing: reply).prefix(120))")
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
