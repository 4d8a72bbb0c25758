import Foundation
import Synchronization
import WaybillDomain
import WaybillStorage

/// A dedicated thread that owns one `PostgresSession` and runs jobs from a queue on it.
///
/// Blocking libpq calls therefore never run on Swift's cooperative pool, and a connection never
/// crosses threads (libpq's rule: one `PGconn`, one thread at a time).
final class PostgresWorker: Sendable {
    private let finished = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)

    /// Starts the thread; it connects lazily, on its first job. With `kept` it is the store's kept
    /// reader: it takes urgent jobs only, when every other worker is busy
    /// (`JobQueue.take(upTo:urgentOnly:)`), and keeps its connection open between them
    /// (`keepConnected`).
    init(
        name: String, queue: JobQueue<PostgresJob>, settings: PostgresConnectionSettings, health: PostgresHealth,
        connectTimeout: Duration, kept: KeptReader? = nil
    ) {
        let finished = self.finished
        let thread = Thread { [self] in
            threadID.withLock { $0 = pthread_self() }
            let session = PostgresSession(settings: settings, health: health, connectTimeout: connectTimeout)
            if let kept {
                Self.keepConnected(session, serving: queue, kept)
            } else {
                while let jobs = queue.take(upTo: 1) { for job in jobs { job.run(session) } }
            }
            session.close()
            finished.signal()
        }
        thread.name = name
        thread.start()
    }

    /// The kept reader's loop. Its connection is opened at once, not in the storm that first needs
    /// it, when the server may be out of connection slots (found by a review). Between urgent jobs
    /// it wakes now and then (`KeptReader.Timing`) to look after it: a connection the server ended
    /// while idle (`idle_session_timeout`, `pg_terminate_backend`, a restart), or one of before a
    /// failure any worker saw, is dropped and opened again; a connect that fails is tried again
    /// after 1 s, doubling to 30 s, and shows in `PostgresOrderStore.health` as a warning, which
    /// the server logs, until the session holds a connection again (its own, or one a job opened).
    /// Before, a connect that failed at start was not logged and was tried again only by the first
    /// urgent read, the one that needed the connection.
    ///
    /// A connect of its own waits (up to the store's `connectTimeout`, 2 s by default), so it is
    /// tried only when nothing is owed sooner: not before its retry time, not while an urgent job
    /// waits (the job connects itself, within its own budget) or the queue is closed, and not while
    /// the store knows the server is down (calls are refused at once then, and a call's probe finds
    /// it back). A review of the first version
    /// found it connecting after every urgent job of an outage, holding the next one for 2 s.
    private static func keepConnected(_ session: PostgresSession, serving queue: JobQueue<PostgresJob>, _ kept: KeptReader) {
        var retry = kept.timing.firstRetry
        var nextConnect = ContinuousClock.now
        while true {
            var connected = session.holdsUsableConnection()
            if !connected, ContinuousClock.now >= nextConnect, !queue.hasUrgentJobsOrIsClosed {
                if session.health.isDown {
                    nextConnect = .now + kept.timing.firstRetry  // look again then
                } else {
                    // Not reported to `health`: a refused connect (no free slot) says nothing of
                    // the server being down, and calls find that out themselves.
                    connected = (try? session.connection(deadline: .now + session.connectTimeout)) != nil
                    if !connected {
                        kept.noteConnected(false)
                        nextConnect = .now + retry
                        retry = min(retry * 2, kept.timing.maximumRetry)
                    }
                }
            }
            if connected {
                // Also after a connect an urgent read made: the next loss starts from the first retry.
                kept.noteConnected(true)
                retry = kept.timing.firstRetry
                nextConnect = .now
            }
            kept.wake(queue, after: connected ? kept.timing.checkInterval : max(.milliseconds(10), ContinuousClock.now.duration(to: nextConnect)))
            guard let jobs = queue.take(upTo: 1, urgentOnly: true) else { return }
            for job in jobs { job.run(session) }
        }
    }

    /// Whether the caller runs on this worker's thread (where waiting for it would deadlock).
    var isCurrentThread: Bool {
        threadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    /// Blocks until the thread has drained its queue (after `close()` on it) and closed its connection.
    func waitUntilFinished() {
        finished.wait()
        finished.signal()  // later waiters return at once
    }
}

/// What the store's kept reader shares with the store: its timing, and whether its connection is
/// open (`PostgresOrderStore.health`).
final class KeptReader: Sendable {
    struct Timing: Sendable {
        /// How often an open connection is looked at (no round trip: a `poll` and the generation).
        var checkInterval: Duration = .seconds(10)
        /// The first wait after a failed connect; it doubles up to `maximumRetry`.
        var firstRetry: Duration = .seconds(1)
        var maximumRetry: Duration = .seconds(30)
    }

    let timing: Timing
    /// Whether the last connect failed (and none has succeeded since).
    private let unconnected = Atomic<Bool>(false)
    /// When the earliest wake-up asked for is due; `nil` when none is.
    private let nextWake = Mutex<ContinuousClock.Instant?>(nil)

    init(timing: Timing) { self.timing = timing }

    /// The kept reader has no connection: its last connect failed.
    var isUnconnected: Bool { unconnected.load(ordering: .relaxed) }

    func noteConnected(_ connected: Bool) { unconnected.store(!connected, ordering: .relaxed) }

    /// Makes the kept reader's wait end, with no job, `delay` from now, unless an earlier wake-up is
    /// due already. On Dispatch's monotonic clock: a wall clock stepped back must not stop the
    /// retries (a condition's timed wait counts on the wall clock).
    func wake(_ queue: JobQueue<PostgresJob>, after delay: Duration) {
        let due = ContinuousClock.now + delay
        let scheduled = nextWake.withLock { next in
            if let next, next > ContinuousClock.now, next <= due { return false }
            next = due
            return true
        }
        guard scheduled else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + delay.timeInterval) { [self] in
            nextWake.withLock { next in if next == due { next = nil } }
            queue.wakeKeptWorkers()
        }
    }
}
