import CWebSockets
import Foundation
import Synchronization

/// One lws context and the one thread that makes every lws call on it.
///
/// Other threads hand work over with `post(_:)`: a `Mutex`-guarded inbox plus `lws_cancel_service`,
/// the only lws call allowed off the service thread. The owner's callback must call `drainInbox()`
/// from `LWS_CALLBACK_EVENT_WAIT_CANCELLED` (wake-ups coalesce, so it drains everything).
final class ServiceLoop: @unchecked Sendable {  // safe: `shared` is a Mutex; `context`/`shouldStop` only on `thread`
    typealias Work = @Sendable () -> Void

    private struct Shared {
        var inbox: [Work] = []
        /// The context as bits, 0 while there is none: others may only cancel a live context.
        var contextBits: UInt = 0
        var hasStarted = false
        /// The service thread's `pthread_t` (0 until it runs), for `isOnLoop`.
        var threadID: UInt = 0
        var hasEnded = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
    }

    private let shared = Mutex(Shared())
    private let name: String
    /// The context; service thread only (nil before start and after destroy).
    private(set) var context: OpaquePointer?
    /// Asked after every service iteration, on the service thread; `true` ends the loop.
    var shouldStop: () -> Bool = { false }
    /// Runs on the service thread just before the context is destroyed.
    var willDestroy: () -> Void = {}
    /// Entered in `start`, left when the loop has ended: for blocking waits.
    private let running = DispatchGroup()

    init(name: String) { self.name = name }

    /// Starts the thread, which creates the context with `makeContext`.
    /// - Throws: `LoopStartError` when `makeContext` returns nil (e.g. the port is taken).
    func start(makeContext: @escaping @Sendable () -> OpaquePointer?) throws {
        let started = DispatchSemaphore(value: 0)
        let first = shared.withLock { s in
            defer { s.hasStarted = true }
            return !s.hasStarted
        }
        guard first else { throw LoopStartError() }
        running.enter()
        let thread = Thread { [self] in
            guard let ctx = makeContext() else {
                finish()
                started.signal()
                return
            }
            context = ctx
            shared.withLock {
                $0.contextBits = UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(ctx)))
                $0.threadID = UInt(pthread_self())
            }
            started.signal()
            lws_cancel_service(ctx)  // run anything posted before the context existed
            run(ctx)
        }
        thread.name = name
        thread.start()
        started.wait()
        // The semaphore orders the thread's write of `context` before this read.
        if context == nil { throw LoopStartError() }
    }

    private func run(_ ctx: OpaquePointer) {
        while lws_service(ctx, 0) >= 0, !shouldStop() {}
        willDestroy()
        shared.withLock { $0.contextBits = 0 }  // nobody may cancel a context being destroyed
        lws_context_destroy(ctx)
        context = nil
        finish()
    }

    /// Marks the loop ended, runs work posted too late (it sees `context == nil`), wakes waiters.
    private func finish() {
        let (work, waiters) = shared.withLock { s -> ([Work], [CheckedContinuation<Void, Never>]) in
            s.hasEnded = true
            defer {
                s.inbox = []
                s.endWaiters = []
            }
            return (s.inbox, s.endWaiters)
        }
        for item in work { item() }
        for waiter in waiters { waiter.resume() }
        running.leave()
    }

    /// Queues `work` for the service thread and wakes it. Any thread.
    /// - Returns: `false` if the loop has ended (then `work` is dropped).
    @discardableResult
    func post(_ work: @escaping Work) -> Bool {
        shared.withLock { s in
            guard !s.hasEnded else { return false }
            s.inbox.append(work)
            if let ctx = OpaquePointer(bitPattern: s.contextBits) { lws_cancel_service(ctx) }
            return true
        }
    }

    /// Wakes the service thread without work (so it re-checks `shouldStop`). Any thread.
    func wake() {
        shared.withLock { s in
            if let ctx = OpaquePointer(bitPattern: s.contextBits) { lws_cancel_service(ctx) }
        }
    }

    /// Runs everything posted so far. Service thread only, from `EVENT_WAIT_CANCELLED`.
    func drainInbox() {
        let work = shared.withLock { s -> [Work] in
            defer { s.inbox = [] }
            return s.inbox
        }
        for item in work { item() }
    }

    /// Whether `start` has been called (the loop may have ended since). Any thread.
    var hasStarted: Bool { shared.withLock { $0.hasStarted } }

    /// Whether the caller is the service thread.
    var isOnLoop: Bool {
        let id = shared.withLock { $0.threadID }
        return id != 0 && pthread_equal(pthread_self(), pthread_t(id)) != 0
    }

    /// Blocks until the loop has ended (at once if it never started). Never call it on the loop.
    func waitUntilEndedBlocking() {
        assert(!isOnLoop, "waiting for the service thread on itself")
        running.wait()
    }

    /// Returns once the thread has destroyed the context and ended. Any task; safe to call twice.
    func waitUntilEnded() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = shared.withLock { s -> Bool in
                if s.hasEnded { return true }
                s.endWaiters.append(c)
                return false
            }
            if resumeNow { c.resume() }
        }
    }
}

/// The lws context could not be created (most often: the port could not be bound).
struct LoopStartError: Error {}
