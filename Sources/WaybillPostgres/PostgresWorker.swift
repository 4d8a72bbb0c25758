import Foundation
import Synchronization
import WaybillStorage

/// A dedicated thread that owns one `PostgresSession` and runs jobs from a queue on it.
///
/// Blocking libpq calls therefore never run on Swift's cooperative pool, and a connection never
/// crosses threads (libpq's rule: one `PGconn`, one thread at a time).
final class PostgresWorker: Sendable {
    private let finished = DispatchSemaphore(value: 0)
    private let threadID = Mutex<pthread_t?>(nil)

    /// Starts the thread; it connects lazily, on its first job. With `urgentOnly` it takes urgent
    /// jobs only, when every other worker is busy (`JobQueue.take(upTo:urgentOnly:)`), and connects
    /// at start.
    init(
        name: String, queue: JobQueue<PostgresJob>, settings: PostgresConnectionSettings, health: PostgresHealth,
        urgentOnly: Bool = false
    ) {
        let finished = self.finished
        let thread = Thread { [self] in
            threadID.withLock { $0 = pthread_self() }
            let session = PostgresSession(settings: settings, health: health)
            // The kept reader connects at once (the others when calls need them): it is needed
            // when every other reader is busy, in a reconnect storm, the worst moment to find the
            // server out of connection slots (found by a review). A failure here is only retried
            // by its first call, which reports it to `health` as any call's connect does.
            if urgentOnly { _ = try? session.connection(deadline: .now + PostgresSession.connectTimeout) }
            while let jobs = queue.take(upTo: 1, urgentOnly: urgentOnly) { for job in jobs { job.run(session) } }
            session.close()
            finished.signal()
        }
        thread.name = name
        thread.start()
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
