import Foundation
public import WaybillStorage
import WaybillDomain

/// A cluster-wide lease: a PostgreSQL session advisory lock held on a dedicated connection.
///
/// `acquire()` tries `pg_try_advisory_lock` every 250 ms until it gets the lock. While held, a
/// `SELECT 1` heartbeat runs every second with a 1.5 s client deadline; a miss or a broken
/// connection turns `isHeld` false at once and closes the session, so the server frees the lock
/// for another node — the holder steps down before anyone else can take over (field notes §5).
/// The session also runs with server-side keepalives, a TCP user timeout and a 5 s idle session
/// timeout, so a holder that froze or vanished loses the lock within about 5 s.
///
/// All libpq calls run on the lease's own thread, started by `acquire()` and ended once the
/// lease is released or lost.
public final class PostgresLease: Lease {
    private let core: Core

    /// - Parameters:
    ///   - confirmationLifetime: how long a heartbeat's confirmation lasts (tests shorten it to
    ///     make a lapse happen on demand; see `Core.isHeld`).
    ///   - connectTimeout: the store's bound on one connect (`PostgresOrderStore`'s `connectTimeout`).
    init(
        name: String, settings: PostgresConnectionSettings, confirmationLifetime: Duration, connectTimeout: Duration
    ) {
        core = Core(
            name: name, settings: settings, confirmationLifetime: confirmationLifetime, connectTimeout: connectTimeout)
    }

    deinit { core.shutDown(waiting: false) }

    /// Waits until this process holds the lease; `false` only when the task is cancelled (or
    /// the store was closed).
    public func acquire() async -> Bool { await core.acquire() }

    /// Whether the lease is held: the last heartbeat succeeded less than 2.5 s ago.
    public var isHeld: Bool { core.isHeld }

    /// Gives the lease up: closes its session, which frees the lock on the server.
    public func release() async { await core.release() }

    /// Stops the lease's thread and closes its session (the store is closing). Blocks until done.
    func shutDown() { core.shutDown(waiting: true) }
}

extension PostgresLease {
    /// The advisory lock's class id ("WAYS"); the object id is `hashtext(name)`.
    static let lockClass: Int32 = 0x5741_5953
    static let retryInterval: Duration = .milliseconds(250)
    static let heartbeatInterval: Duration = .seconds(1)
    static let heartbeatDeadline: Duration = .milliseconds(1500)
    /// `isHeld` turns false this long after the last confirmed heartbeat, even if the thread
    /// could not run to notice a miss.
    static let confirmationLifetime: Duration = .milliseconds(2500)

    /// The state shared by callers and the lease thread. `@unchecked Sendable`: every field is
    /// read and written only while holding `condition`, which the thread also waits on.
    private final class Core: @unchecked Sendable {
        enum Phase { case idle, acquiring, held }

        let name: String
        let settings: PostgresConnectionSettings
        let connectTimeout: Duration
        let confirmationLifetime: Duration
        private let condition = NSCondition()
        private var phase = Phase.idle
        private var confirmedAt: ContinuousClock.Instant?
        private var waiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        private var nextWaiter = 0
        private var threadRunning = false
        private var stopWaiters: [CheckedContinuation<Void, Never>] = []
        private var isShutDown = false
        /// Whether this thread's session holds the advisory lock (touched by the lease thread only).
        private var sessionHoldsLock = false

        init(name: String, settings: PostgresConnectionSettings, confirmationLifetime: Duration, connectTimeout: Duration) {
            self.name = name
            self.settings = settings
            self.connectTimeout = connectTimeout
            self.confirmationLifetime = confirmationLifetime
        }

        var isHeld: Bool {
            locked {
                guard phase == .held, let confirmedAt else { return false }
                return ContinuousClock.now < confirmedAt + confirmationLifetime
            }
        }

        func acquire() async -> Bool {
            let id = locked { () -> Int in
                nextWaiter += 1
                return nextWaiter
            }
            return await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                    let immediate: Bool? = locked {
                        if isShutDown || Task.isCancelled { return false }
                        // Held and confirmed: at once. Held on the thread's books but unconfirmed
                        // for too long (`isHeld` is false): wait until the thread confirms it on
                        // this session again (or takes it anew), instead of answering "held" to a
                        // caller that would find `isHeld` false and ask again in a loop.
                        if phase == .held, let confirmedAt,
                            ContinuousClock.now < confirmedAt + confirmationLifetime
                        {
                            return true
                        }
                        waiters[id] = continuation
                        phase = .acquiring
                        startThreadIfNeeded()
                        return nil
                    }
                    if let immediate { continuation.resume(returning: immediate) }
                }
            } onCancel: {
                let cancelled = locked { () -> CheckedContinuation<Bool, Never>? in
                    let waiter = waiters.removeValue(forKey: id)
                    if waiters.isEmpty && phase == .acquiring {
                        phase = .idle
                        condition.broadcast()
                    }
                    return waiter
                }
                cancelled?.resume(returning: false)
            }
        }

        func release() async {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let done = locked { () -> Bool in
                    guard threadRunning else {
                        phase = .idle
                        return true
                    }
                    if phase == .held { phase = .idle }
                    stopWaiters.append(continuation)
                    condition.broadcast()
                    return false
                }
                if done { continuation.resume() }
            }
        }

        func shutDown(waiting: Bool) {
            condition.lock()
            isShutDown = true
            phase = .idle
            let pending = Array(waiters.values)
            waiters.removeAll()
            condition.broadcast()
            while waiting && threadRunning { condition.wait() }
            condition.unlock()
            for waiter in pending { waiter.resume(returning: false) }
        }

        private func locked<T>(_ body: () -> T) -> T {
            condition.lock()
            defer { condition.unlock() }
            return body()
        }

        /// Called with `condition` held.
        private func startThreadIfNeeded() {
            guard !threadRunning else { return }
            threadRunning = true
            let thread = Thread { [self] in run() }
            thread.name = "waybill.postgres.lease"
            thread.start()
        }

        // MARK: The lease thread

        /// Serves the lease until nobody wants it: tries to lock, then heartbeats, then gives the
        /// session back. Starts over if an `acquire` arrived while it was giving up.
        private func run() {
            while true {
                var connection: PostgresConnection?
                while let current = locked({ isShutDown ? nil : phase }), current != .idle {
                    switch current {
                    case .acquiring: connection = tryLock(connection)
                    case .held: connection = heartbeat(connection)
                    case .idle: break
                    }
                }
                // Unlocking first frees the lock at once for a node waiting on it; closing the
                // session would free it too, only once the server notices the backend exit.
                if let connection, connection.isUsable, heldBeforeExit() {
                    _ = try? connection.execute(
                        "SELECT pg_advisory_unlock($1::integer, hashtext($2))",
                        [.integer(Int64(PostgresLease.lockClass)), .text(name)], deadline: .now + .milliseconds(500))
                }
                connection?.close()
                sessionHoldsLock = false
                let (released, exits) = locked { () -> ([CheckedContinuation<Void, Never>], Bool) in
                    confirmedAt = nil
                    defer { stopWaiters.removeAll() }
                    // An `acquire` that came in meanwhile found the thread still running and
                    // relies on it: serve it instead of exiting.
                    if phase == .acquiring && !isShutDown { return (stopWaiters, false) }
                    threadRunning = false
                    if phase == .held { phase = .idle }
                    condition.broadcast()
                    return (stopWaiters, true)
                }
                // The session is closed: whoever waited in `release` is done.
                for waiter in released { waiter.resume() }
                guard exits else { continue }
                return
            }
        }

        private func heldBeforeExit() -> Bool {
            defer { sessionHoldsLock = false }
            return sessionHoldsLock
        }

        /// One try; on success the waiters resume, else the thread waits the retry interval.
        private func tryLock(_ existing: PostgresConnection?) -> PostgresConnection? {
            var connection = existing
            do throws(PostgresError) {
                if connection?.isUsable != true {
                    connection = try PostgresConnection(settings, deadline: .now + connectTimeout)
                    sessionHoldsLock = false
                }
                let got: Bool?
                if sessionHoldsLock {
                    // The lapsed case of `acquire`: this session still holds the lock (locks are
                    // per session, and it is alive if it answers); taking it again would stack.
                    try connection?.execute("SELECT 1", deadline: .now + PostgresLease.heartbeatDeadline)
                    got = true
                } else {
                    got = try connection?.queryFirst(
                        "SELECT pg_try_advisory_lock($1::integer, hashtext($2))",
                        [.integer(Int64(PostgresLease.lockClass)), .text(name)],
                        deadline: .now + PostgresLease.heartbeatDeadline
                    ) { $0.bool(0) }
                }
                if got == true {
                    sessionHoldsLock = true
                    let won = locked { () -> [CheckedContinuation<Bool, Never>]? in
                        // Nobody wants it any more (cancelled, shut down): the loop ends and
                        // closing the session gives the lock back.
                        guard phase == .acquiring, !isShutDown else { return nil }
                        phase = .held
                        confirmedAt = .now
                        defer { waiters.removeAll() }
                        return Array(waiters.values)
                    }
                    for waiter in won ?? [] { waiter.resume(returning: true) }
                    return connection
                }
            } catch {
                connection?.close()
                connection = nil
            }
            wait(for: PostgresLease.retryInterval, while: .acquiring)
            return connection
        }

        /// Waits a heartbeat interval, then confirms the session is alive.
        private func heartbeat(_ existing: PostgresConnection?) -> PostgresConnection? {
            wait(for: PostgresLease.heartbeatInterval, while: .held)
            guard locked({ phase == .held && !isShutDown }), let connection = existing else { return existing }
            do throws(PostgresError) {
                try connection.execute("SELECT 1", deadline: .now + PostgresLease.heartbeatDeadline)
                locked { if phase == .held { confirmedAt = .now } }
                return connection
            } catch {
                // Step down before the server could give the lock to another node.
                locked {
                    if phase == .held { phase = .idle }
                    confirmedAt = nil
                }
                connection.close()
                sessionHoldsLock = false
                return nil
            }
        }

        /// Sleeps up to `interval`, waking early when the phase changes or the lease shuts down.
        /// Measured on the monotonic clock, in slices of at most 100 ms: `NSCondition` waits for a
        /// wall-clock date, and a clock stepped back (a VM resumed, NTP at boot) would otherwise
        /// stretch a 1 s heartbeat wait by the size of the step.
        private func wait(for interval: Duration, while expected: Phase) {
            let end = ContinuousClock.now + interval
            condition.lock()
            while phase == expected && !isShutDown {
                let left = ContinuousClock.now.duration(to: end)
                guard left > .zero else { break }
                let slice = min(left, .milliseconds(100))
                _ = condition.wait(until: Date() + Double(slice.milliseconds) / 1000)
            }
            condition.unlock()
        }
    }
}
