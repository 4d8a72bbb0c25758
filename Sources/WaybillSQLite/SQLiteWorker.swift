import Foundation
import Synchronization
import WaybillStorage

/// A dedicated thread that owns one `SQLiteConnection` and runs jobs from a queue on it.
///
/// The connection is opened, used and closed on this thread only, so it never crosses threads
/// and blocking `sqlite3_*` calls never run on Swift's cooperative pool.
final class SQLiteWorker: Sendable {
    private let finished = DispatchSemaphore(value: 0)
    /// The worker thread's id, set by the thread itself before `init` returns.
    private let threadID = Mutex<pthread_t?>(nil)

    /// Starts the thread and waits until it opened its connection.
    /// - Parameters:
    ///   - batchLimit: how many queued jobs `perform` receives at most at once.
    ///   - open: opens and prepares the connection (on the new thread).
    ///   - perform: runs a batch of jobs on the connection (on the new thread).
    /// - Throws: what `open` threw; the thread has then already exited.
    ///   - shared: for the writer: the connection is lent to whoever holds this lock (the thread
    ///     takes it for each batch; `SQLiteWriterExecutor` may run a batch on the service thread).
    ///   - urgentOnly: the worker takes urgent jobs only, when every other worker is busy
    ///     (`JobQueue.take(upTo:urgentOnly:)`).
    init<Job: Sendable>(
        name: String, queue: JobQueue<Job>, batchLimit: Int, shared: SharedConnection? = nil, urgentOnly: Bool = false,
        open: @escaping @Sendable () throws(SQLiteError) -> SQLiteConnection,
        perform: @escaping @Sendable (SQLiteConnection, [Job]) -> Void
    ) throws(SQLiteError) {
        let opened = OpenResult()
        let finished = self.finished
        // Every stored property has its value already, so the thread may use `self`; it keeps
        // the worker alive until it exits.
        let thread = Thread { [self] in
            threadID.withLock { $0 = pthread_self() }
            let connection: SQLiteConnection
            do throws(SQLiteError) {
                connection = try open()
                opened.report(nil)
            } catch {
                opened.report(error)
                finished.signal()
                return
            }
            if let shared {
                shared.lend(connection)
                while queue.waitForJobs() {
                    shared.ifFree(orWait: true) { db in
                        if let jobs = queue.takeNow(upTo: batchLimit) { perform(db, jobs) }
                    }
                }
                shared.takeBack()
            } else {
                while let jobs = queue.take(upTo: batchLimit, urgentOnly: urgentOnly) { perform(connection, jobs) }
            }
            connection.close()
            finished.signal()
        }
        thread.name = name
        thread.start()
        if let error = opened.wait() { throw error }
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

/// Hands the outcome of opening from the worker thread to `init`.
private final class OpenResult: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let error = Mutex<SQLiteError?>(nil)

    func report(_ failure: SQLiteError?) {
        error.withLock { $0 = failure }
        semaphore.signal()
    }

    func wait() -> SQLiteError? {
        semaphore.wait()
        return error.withLock { $0 }
    }
}

/// The writer's connection, used by one thread at a time: the writer thread, or a thread that
/// runs queued writer work itself while the writer thread sleeps (`SQLiteWriterExecutor.runHere`).
///
/// SQLite connections opened `NOMUTEX` may move between threads as long as no two use one at
/// once; this lock is what guarantees that.
final class SharedConnection: @unchecked Sendable {  // safe: `connection` only under `lock`
    private let lock = NSLock()
    private var connection: SQLiteConnection?
    /// The thread inside `ifFree`'s body (0: none), for `isHeldByCurrentThread`.
    private let holder = Atomic<UInt>(0)

    /// The writer thread lends its connection once it is open.
    func lend(_ connection: SQLiteConnection) {
        lock.lock()
        self.connection = connection
        lock.unlock()
    }

    /// The writer thread takes it back before it closes it; later `ifFree` calls find none.
    func takeBack() {
        lock.lock()
        connection = nil
        lock.unlock()
    }

    /// Runs `body` with the connection if nobody else uses it, or after waiting for it when `orWait`;
    /// returns `nil` (without running `body`) when it is busy and not waited for, or already taken back.
    @discardableResult
    func ifFree<T>(orWait: Bool = false, _ body: (SQLiteConnection) -> T) -> T? {
        if orWait { lock.lock() } else if !lock.try() { return nil }
        holder.store(UInt(pthread_self()), ordering: .relaxed)
        defer {
            holder.store(0, ordering: .relaxed)
            lock.unlock()
        }
        return connection.map(body)
    }

    /// Whether the calling thread is running work with the connection now (waiting for the writer
    /// thread to finish would then deadlock: it needs the connection back to close it).
    var isHeldByCurrentThread: Bool { holder.load(ordering: .relaxed) == UInt(pthread_self()) }

    /// The connection, when the calling thread is inside `ifFree`'s body: it holds the lock, so
    /// nobody else uses the connection until that body returns.
    var heldByCurrentThread: SQLiteConnection? { isHeldByCurrentThread ? connection : nil }
}
