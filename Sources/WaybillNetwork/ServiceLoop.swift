import CWebSockets
import Foundation
import Synchronization

/// One lws context and the one thread that makes every lws call on it.
///
/// Other threads hand work over with `post(_:)`: a `Mutex`-guarded inbox plus `lws_cancel_service`,
/// the only lws call allowed off the service thread, made after the lock is released (see `Wake`).
/// The owner's callback must call `drainInbox()` from `LWS_CALLBACK_EVENT_WAIT_CANCELLED` (wake-ups
/// coalesce, so it drains everything).
///
/// With `EventLoopKind.libev` the thread creates a libev loop, lends it to lws as a foreign loop
/// (the owner's `makeContext` calls `prepare(_:)`), and runs `ev_run` instead of `lws_service`. Work
/// the service thread posts to itself then needs no wake-up: a libev prepare watcher runs `wokenUp`
/// before the loop next waits (see `drainOwed`). A 50 ms
/// heartbeat timer then does two jobs: it asks `shouldStop` (and breaks the loop), and it keeps the
/// plugin's own timer from being armed far in the future, which would delay every sul or
/// `lws_set_timeout` scheduled from a socket callback until then (the shared libwebsockets field notes, ../shared/notes/libwebsockets.md §13, trap 1).
final class ServiceLoop: @unchecked Sendable {  // safe: `shared` is a Mutex; other vars only on `thread`
    typealias Work = @Sendable () -> Void

    /// A posted closure, kept in the inbox as it came. Why the wrapper: in a `[Work]` each closure
    /// is stored in the array's most general form, so every post allocated a thunk around it, and
    /// every drain ran through that thunk and freed it (two posts per order write; docs/BENCHMARKS.md,
    /// 2026-12-07 (11:10– UTC)).
    private struct WorkItem {
        let run: Work
    }

    private struct Shared {
        var inbox: [WorkItem] = []
        /// The context as bits, 0 while there is none: others may only cancel a live context.
        var contextBits: UInt = 0
        var hasStarted = false
        /// The service thread's `pthread_t` (0 until it runs), for `isOnLoop`.
        var threadID: UInt = 0
        var hasEnded = false
        var endWaiters: [CheckedContinuation<Void, Never>] = []
        /// Bounded work was refused since the last drain: `onOverflow` runs after it.
        var overflowed = false
        /// Bounded posts refused since start.
        var overflows = 0
        /// The thread inside an announced batch (`beginBatch` … `endBatch`): its posts there do not
        /// wake the service thread one by one (0: none). Cleared at `endBatch`, so a thread that
        /// later gets the same `pthread_t` (the writer exited and its stack was reused) is not held.
        var batchingThread: UInt = 0
        /// A post inside a batch found the inbox empty and did not wake the thread.
        var wakeHeld = false
        /// That held wake-up has already waited through one batch end.
        var heldThroughBatch = false
        /// The prepare watcher runs (libev): a wake-up the service thread owes itself is a drain
        /// before the loop waits, not an `eventfd` write (`liveContextWake`).
        var drainsBeforeWaiting = false
    }

    private let shared = Mutex(Shared())
    /// The inbox's other buffer: a drain swaps it in for the posted work and hands it back emptied,
    /// with its capacity, so a post needs no allocation (the inbox was `[]` after every drain, and
    /// the first post after it, and the second, each allocated: two per order write, counted with a
    /// `malloc` probe, docs/BENCHMARKS.md, 2026-12-06 10:21–). Service thread only.
    private var spareInbox: [WorkItem] = []
    /// The most items a kept buffer may hold room for: a burst's buffer is not kept for good.
    static let keptInboxCapacity = 1024
    /// `lws_cancel_service` calls under way outside the lock. Each is counted while the lock is held
    /// and the context is live; `run` clears the context under the lock and then waits for this to
    /// reach 0 before it destroys the context, so no call ever reaches a destroyed context.
    private let cancelsInFlight = Atomic<Int>(0)
    /// Wake-ups sent (`lws_cancel_service` calls) since start, for tests.
    private let wakeUpsSent = Atomic<Int>(0)
    private let name: String
    /// How many items the inbox may hold when a bounded post arrives (see `post(_:bounded:)`).
    let maxQueuedWork: Int
    /// Runs on the service thread after a drain that followed refused bounded work: the owner
    /// makes up for the lost work (the server closes every WebSocket so clients resume).
    var onOverflow: () -> Void = {}
    /// The context; service thread only (nil before start and after destroy).
    private(set) var context: OpaquePointer?
    /// Asked after every service iteration, on the service thread; `true` ends the loop.
    var shouldStop: () -> Bool = { false }
    /// Runs on the service thread just before the context is destroyed.
    var willDestroy: () -> Void = {}
    /// What the owner does when woken (its `EVENT_WAIT_CANCELLED` work, which includes `drainInbox`);
    /// `nil`: `drainInbox`. The prepare watcher runs it for the drains the service thread owes itself.
    var wokenUp: (() -> Void)?
    /// The service thread posted to itself (libev): `wokenUp` runs before the loop waits again.
    ///
    /// Measured (`perf`, dwarf call graphs, `paced 1000`): an order write the service thread runs
    /// itself (`WriterExecutor.runHere`) posts its answer and frames, and the wake-up that posted
    /// them was an `eventfd` write to its own loop, then one more loop pass to read it: the
    /// `eventfd` write alone was 4.7 % of the server's samples. Service thread only.
    ///
    /// One difference from a drain woken by `eventfd`: lws runs its due timers and forced service
    /// from an idle pass that only its socket callbacks start, so an lws timer the drained work
    /// sets to fire at once (`lws_set_timeout(…, LWS_TO_KILL_ASYNC)`: closing a broken socket)
    /// fires at the next socket event, or at the 50 ms heartbeat at the latest. Answers that resume
    /// reading are not delayed: lws asks for `POLLOUT` then, a socket event of its own, which the
    /// answer reports to libev at once (`reportWritable`), so lws's callback still runs and starts
    /// its idle pass.
    private var drainOwed = false
    /// Loop passes so far: the prepare watcher's runs (libev only; service thread). For tests
    /// (`WriteStatistics.loopPasses`).
    private(set) var passes = 0
    /// Runs of the loop's own 50 ms timer (libev only; service thread): each can be a pass of its
    /// own (`WriteStatistics.timerTicks`).
    private(set) var timerTicks = 0
    /// libev's prepare watcher for `drainOwed` (libev only).
    private let prepareWatcher = UnsafeMutablePointer<lwsx_prepare>.allocate(capacity: 1)
    /// Entered in `start`, left when the loop has ended: for blocking waits.
    private let running = DispatchGroup()
    /// Set by `start`, before the thread exists; read only on the thread after that.
    private(set) var kind = EventLoopKind.poll
    /// The libev loop (libev only; service thread).
    private var evLoop: UnsafeMutableRawPointer?
    /// `info.foreign_loops`: one slot holding `evLoop`. lws reads it during context creation.
    private let foreignLoops = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
    /// The heartbeat timer (libev only); its owner is this loop, unretained (the thread keeps it alive).
    private let heartbeat = UnsafeMutablePointer<lwsx_timer>.allocate(capacity: 1)
    static let heartbeatMicroseconds: lws_usec_t = 50_000

    init(name: String, maxQueuedWork: Int = .max) {
        self.name = name
        self.maxQueuedWork = max(1, maxQueuedWork)
        foreignLoops.initialize(to: nil)
        heartbeat.initialize(to: lwsx_timer())
        prepareWatcher.initialize(to: lwsx_prepare())
    }

    deinit {
        foreignLoops.deallocate()
        heartbeat.deallocate()
        prepareWatcher.deallocate()
    }

    /// Starts the thread, which creates the context with `makeContext`.
    /// - Throws: `LoopStartError` when `makeContext` returns nil (e.g. the port is taken, or the libev
    ///   plugin could not be loaded).
    func start(kind: EventLoopKind = .poll, makeContext: @escaping @Sendable () -> OpaquePointer?) throws {
        let started = DispatchSemaphore(value: 0)
        let first = shared.withLock { s in
            defer { s.hasStarted = true }
            return !s.hasStarted
        }
        guard first else { throw LoopStartError() }
        self.kind = kind
        running.enter()
        let thread = Thread { [self] in
            if kind == .libev { evLoop = lwsx_ev_loop_new() }
            guard kind == .poll || evLoop != nil, let ctx = makeContext() else {
                if let evLoop { lwsx_ev_loop_destroy(evLoop) }
                evLoop = nil
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

    /// Adds the loop choice to the context's creation info. Service thread, inside `makeContext`.
    func prepare(_ info: inout lws_context_creation_info) {
        guard kind == .libev, let evLoop else { return }
        info.options |= UInt64(LWS_SERVER_OPTION_LIBEV)
        foreignLoops.pointee = evLoop
        info.foreign_loops = foreignLoops
    }

    private func run(_ ctx: OpaquePointer) {
        if let evLoop {
            scheduleHeartbeat()
            prepareWatcher.pointee.fn = serviceLoopBeforeWaiting
            prepareWatcher.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
            lwsx_prepare_start(evLoop, prepareWatcher)
            shared.withLock { $0.drainsBeforeWaiting = true }
            _ = lwsx_ev_run(evLoop)  // until `heartbeatTick` or `stopIfAsked` calls ev_break
            // From here the service thread's own posts wake it the usual way (and `finish` runs
            // whatever is left once the loop has ended).
            shared.withLock { $0.drainsBeforeWaiting = false }
            lwsx_prepare_stop(evLoop, prepareWatcher)
            lws_sul_cancel(lwsx_timer_sul(heartbeat))
        } else {
            while lws_service(ctx, 0) >= 0, !shouldStop() {}
        }
        willDestroy()
        shared.withLock { $0.contextBits = 0 }  // nobody may cancel a context being destroyed
        // …nor may a cancel counted before that still be running (a few instructions' worth).
        while cancelsInFlight.load(ordering: .acquiring) != 0 { sched_yield() }
        lws_context_destroy(ctx)
        context = nil
        if let evLoop {
            _ = lwsx_ev_run_nowait(evLoop)  // let the watchers lws stopped wind down
            lwsx_ev_loop_destroy(evLoop)
            self.evLoop = nil
        }
        finish()
    }

    /// libev: ends `ev_run` once the owner says so. Service thread (lws callbacks, the heartbeat).
    func stopIfAsked() {
        guard let evLoop, shouldStop() else { return }
        lwsx_ev_break(evLoop)
    }

    fileprivate func scheduleHeartbeat() {
        guard let context else { return }
        heartbeat.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        lws_sul_schedule(context, 0, lwsx_timer_sul(heartbeat), serviceLoopHeartbeat, Self.heartbeatMicroseconds)
    }

    /// libev is about to wait for events: runs the drains the service thread owes itself, including
    /// any its own work owes meanwhile (no prepare pass comes before this wait). Events the drained
    /// work feeds to libev (`reportWritable`) run after this returns, in the same pass; a drain they
    /// owe waits for the next pass, which does not block: lws's callback for them starts its idle
    /// watcher.
    fileprivate func beforeWaiting() {
        passes &+= 1
        while drainOwed {
            drainOwed = false
            if let wokenUp { wokenUp() } else { drainInbox() }
        }
    }

    fileprivate func heartbeatTick() {
        timerTicks &+= 1
        if shouldStop(), let evLoop {
            lwsx_ev_break(evLoop)
        } else {
            scheduleHeartbeat()
        }
    }

    /// Marks the loop ended, runs work posted too late (it sees `context == nil`), wakes waiters.
    private func finish() {
        let (work, waiters) = shared.withLock { s -> ([WorkItem], [CheckedContinuation<Void, Never>]) in
            s.hasEnded = true
            defer {
                s.inbox = []
                s.endWaiters = []
            }
            return (s.inbox, s.endWaiters)
        }
        for item in work { item.run() }
        for waiter in waiters { waiter.resume() }
        running.leave()
    }

    /// Service thread: reports `fd` writable to libev at once (libev only; a no-op with `poll`).
    /// See `ServerCore.answer`.
    func reportWritable(_ fd: Int32) {
        guard kind == .libev, let evLoop else { return }
        lwsx_ev_feed_writable(evLoop, fd)
    }

    /// Queues `work` for the service thread and wakes it. Any thread.
    /// - Returns: `false` if the loop has ended (then `work` is dropped).
    ///
    /// Only the post that makes the inbox non-empty wakes the thread: the thread empties the whole
    /// inbox at once, so later posts before that are picked up by the same wake-up (a burst of fan-out
    /// posts costs one `eventfd` write, not one each).
    ///
    /// A `bounded` post is refused (returns `false`) while the inbox already holds `maxQueuedWork`
    /// items: the service thread is that far behind, and queueing more would only grow memory.
    /// The refusal is counted and `onOverflow` runs after the next drain. Unbounded posts (HTTP
    /// response wake-ups, shutdown) are one per request or per call and always queue.
    @discardableResult
    func post(_ work: @escaping Work, bounded: Bool = false) -> Bool {
        let (posted, wake) = shared.withLock { s -> (Bool, Wake?) in
            guard !s.hasEnded else { return (false, nil) }
            if bounded && s.inbox.count >= maxQueuedWork {
                s.overflows += 1
                s.overflowed = true  // the inbox is not empty: a drain is already on its way
                return (false, nil)
            }
            var needsWake = s.inbox.isEmpty
            if s.batchingThread != 0, pthread_equal(pthread_self(), pthread_t(s.batchingThread)) != 0 {
                if needsWake { s.wakeHeld = true }
                needsWake = false
            } else if s.wakeHeld {
                needsWake = true  // nobody else's work waits for the batching thread
            }
            s.inbox.append(WorkItem(run: work))
            return (true, needsWake ? wakeLocked(&s) : nil)
        }
        send(wake)
        return posted
    }

    // MARK: Batches (a thread that posts in bursts: the store's writer)
    //
    // Measured: the writer thread posts a write's event frames and, a moment later, its answer;
    // each post that found the inbox empty woke the service thread, about one context switch more
    // per write than needed. Inside a batch the posts only queue; the wake-up goes out when the
    // batch is about to wait for the database (`flushBatch`), when the thread goes idle, or at the
    // latest at the end of the next batch. Posts from other threads wake at once, as always, and
    // carry the held work along.

    /// The calling thread starts a batch: its posts no longer wake the service thread by themselves.
    func beginBatch() {
        shared.withLock { $0.batchingThread = UInt(pthread_self()) }
    }

    /// Sends the wake-up the batch holds, if any (the thread is about to block).
    func flushBatch() {
        let wake = shared.withLock { s in s.wakeHeld ? wakeLocked(&s) : nil }
        send(wake)
    }

    /// The batch is over; `idle` says the thread has nothing more to do now. A held wake-up goes
    /// out if idle, or if it has already waited through one batch end; otherwise it waits for the
    /// next batch, which a thread that is not idle runs at once.
    func endBatch(idle: Bool) {
        let wake = shared.withLock { s -> Wake? in
            s.batchingThread = 0
            guard s.wakeHeld else { return nil }
            if idle || s.heldThroughBatch { return wakeLocked(&s) }
            s.heldThroughBatch = true
            return nil
        }
        send(wake)
    }

    /// A wake-up of the service thread, decided under the lock and sent after it (`send`).
    ///
    /// Measured (`perf`, `paced 1000`): sent under the lock, the `eventfd` write (which wakes the
    /// service thread on the other CPU) was still under way when the woken thread reached
    /// `drainInbox`'s lock, so the thread blocked at once on the poster's lock: a priority-inheriting
    /// futex (`Mutex` on Linux) and a second wake-up, 2–3 % of the server's samples.
    private struct Wake {
        let context: OpaquePointer
    }

    private func send(_ wake: Wake?) {
        guard let wake else { return }
        lws_cancel_service(wake.context)
        cancelsInFlight.subtract(1, ordering: .releasing)
        wakeUpsSent.add(1, ordering: .relaxed)
    }

    /// Wake-ups sent to the service thread so far (`eventfd` writes). Any thread.
    var wakeUps: Int { wakeUpsSent.load(ordering: .relaxed) }

    /// Room the inbox has for posts now (tests: the buffer a drain hands back). Any thread.
    var inboxCapacity: Int { shared.withLock { $0.inbox.capacity } }
    /// Posts waiting for the next drain (tests). Any thread.
    var queuedWorkCount: Int { shared.withLock { $0.inbox.count } }

    /// Forgets a held wake-up and returns the wake-up to send once the lock is released (nil when
    /// there is no live context). Inside the lock.
    private func wakeLocked(_ s: inout Shared) -> Wake? {
        s.wakeHeld = false
        s.heldThroughBatch = false
        return liveContextWake(s)
    }

    /// Counts the wake-up as in flight while the context is known to be live. Inside the lock.
    /// On the service thread with the prepare watcher running, the wake-up is owed to itself instead
    /// (`drainOwed`): nothing is sent.
    private func liveContextWake(_ s: Shared) -> Wake? {
        guard let ctx = OpaquePointer(bitPattern: s.contextBits) else { return nil }
        if s.drainsBeforeWaiting, pthread_equal(pthread_self(), pthread_t(s.threadID)) != 0 {
            drainOwed = true
            return nil
        }
        cancelsInFlight.add(1, ordering: .relaxed)
        return Wake(context: ctx)
    }

    /// Wakes the service thread without work (so it re-checks `shouldStop`). Any thread.
    func wake() {
        let wake = shared.withLock { s in liveContextWake(s) }
        send(wake)
    }

    /// Runs everything posted so far. Service thread only, from `EVENT_WAIT_CANCELLED` (and `wokenUp`).
    func drainInbox() {
        // Taken out for the drain: work that drains again (it never should) finds no spare and
        // leaves an empty inbox behind, as before.
        var work: [WorkItem] = []
        swap(&work, &spareInbox)
        let overflowed = shared.withLock { s -> Bool in
            swap(&s.inbox, &work)
            defer {
                s.overflowed = false
                // What was held is being run now: its wake-up is no longer owed.
                s.wakeHeld = false
                s.heldThroughBatch = false
            }
            return s.overflowed
        }
        for item in work { item.run() }
        if work.capacity <= Self.keptInboxCapacity {
            work.removeAll(keepingCapacity: true)
            spareInbox = work
        }
        if overflowed { onOverflow() }
        stopIfAsked()
    }

    /// Bounded posts refused so far. Any thread.
    var overflows: Int { shared.withLock { $0.overflows } }

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

/// The prepare watcher's C callback (a plain function pointer, like the heartbeat's).
private func serviceLoopBeforeWaiting(_ owner: UnsafeMutableRawPointer?) {
    guard let owner else { return }
    Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue().beforeWaiting()
}

/// The heartbeat timer's C callback (a top-level `func`, as lws needs a plain function pointer).
private func serviceLoopHeartbeat(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwsx_timer_owner(sul) else { return }
    Unmanaged<ServiceLoop>.fromOpaque(owner).takeUnretainedValue().heartbeatTick()
}

/// The lws context could not be created (most often: the port could not be bound).
struct LoopStartError: Error {}
