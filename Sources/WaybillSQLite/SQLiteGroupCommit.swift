internal import CSQLite
import Foundation
import Synchronization
import WaybillDomain
import WaybillStorage

/// Where the writer thread reports committed events (`OrderStore.observeCommits`): set once the
/// server is wired, read on every commit.
final class CommitObserver: Sendable {
    private let slot = ObserverSlot<[StoredEvent]>()

    /// Sets the observer unless one is set already; returns whether it did.
    func set(_ body: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool { slot.set(body) }

    /// Removes the observer; a later `set` may install another.
    func clear() { slot.clear() }

    /// Called on the writer thread right after a `COMMIT` succeeded.
    func committed(_ events: [StoredEvent]) {
        guard !events.isEmpty, let observer = slot.current else { return }
        observer.call(events)
    }
}

/// A `write` closure bound to its caller's continuation, queued for the writer thread.
struct WriteJob: Sendable {
    /// Runs the closure in the open transaction; says whether it returned and how to resume the caller.
    let run: @Sendable (SQLiteOrderStore.Transaction) -> WriteOutcome
    /// Resumes the caller with `error` without running the closure (the transaction could not start).
    let fail: @Sendable (any Error) -> Void
    /// When the write was queued: its wait for another process's write lock counts from here.
    let queuedAt: ContinuousClock.Instant

    init(
        queuedAt: ContinuousClock.Instant = .now, run: @escaping @Sendable (SQLiteOrderStore.Transaction) -> WriteOutcome,
        fail: @escaping @Sendable (any Error) -> Void
    ) {
        self.run = run
        self.fail = fail
        self.queuedAt = queuedAt
    }
}

extension WriteJob {
    /// The job of a `write` call: runs `body` (its errors translated for the store) and hands the
    /// caller its result once the transaction is settled, through `resume`.
    init<T: Sendable>(
        _ body: @escaping @Sendable (any StoreWriter) throws -> T,
        resume: @escaping @Sendable (Result<T, any Error>) -> Void
    ) {
        self.init(
            run: { tx in
                // Plain branches, not `Result(catching:).mapError` and a switch over a tuple of
                // the two outcomes: in this generic code each of those asked the runtime for type
                // metadata on every write (about 1 µs; docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
                let result: Result<T, any Error>
                do {
                    result = .success(try body(tx))
                } catch {
                    result = .failure(error.translatedForStore)
                }
                let succeeded: Bool
                if case .success = result { succeeded = true } else { succeeded = false }
                return WriteOutcome(succeeded: succeeded) { batchFailure in
                    guard let batchFailure else {
                        resume(result)  // its own outcome: the more precise cause
                        return
                    }
                    if succeeded {
                        resume(.failure(batchFailure))
                    } else {
                        // Its batch did not commit. The closure's own refusal (a 412, a 409) may
                        // rest on an earlier closure's work that no longer exists: the caller
                        // would drop an action, or store that answer under its key, for a
                        // change that never happened (found by a review, 2026-12-05).
                        resume(.failure(StoreError.unavailable("a write batched with this one failed to commit; nothing was written")))
                    }
                }
            },
            fail: { resume(.failure($0)) })
    }
}

/// Where a write committed on the calling thread (`SQLiteWriterExecutor.commitHere`) leaves its
/// result. `@unchecked Sendable`: set and read by that one thread, inside the call.
final class DirectOutcome<T: Sendable>: @unchecked Sendable {
    private(set) var result: Result<T, any Error>?
    func set(_ result: Result<T, any Error>) { self.result = result }
}

/// What running one write closure left behind, until its transaction is settled.
struct WriteOutcome {
    /// `false` when the closure threw: its savepoint is rolled back.
    let succeeded: Bool
    /// Resumes the caller: `nil` after the commit succeeded, else the failure that undid the batch.
    let resume: @Sendable ((any Error)?) -> Void
}

/// The writer thread's batch runner: several write closures, one transaction (group commit).
///
/// One `COMMIT` per batch instead of per write is what lets the embedded store sustain
/// thousands of writes per second. Each closure runs inside its own `SAVEPOINT`, so one that
/// throws rolls back only its own work. Callers are resumed only after the shared `COMMIT`.
struct SQLiteGroupCommit: Sendable {
    /// Counters for tests and metrics, updated on the writer thread, read anywhere.
    final class Statistics: Sendable {
        private let counts = Mutex((transactions: 0, writes: 0, inline: 0, lookups: 0))
        /// Transactions committed so far.
        var committedTransactions: Int { counts.withLock { $0.transactions } }
        /// Of those, transactions committed off the writer thread (`SQLiteWriterExecutor.runHere`).
        var inlineTransactions: Int { counts.withLock { $0.inline } }
        /// Write closures whose transaction committed (including ones that threw inside a batch;
        /// a write that ran alone and threw was rolled back and is not counted).
        var committedWrites: Int { counts.withLock { $0.writes } }
        /// Times a write read the newest event id from the table (`NewestEventCache`), as of the
        /// last commit.
        var newestEventLookups: Int { counts.withLock { $0.lookups } }
        func recordCommit(writes: Int, inline: Bool, newestEventLookups: Int) {
            counts.withLock {
                $0.transactions += 1
                $0.writes += writes
                if inline { $0.inline += 1 }
                $0.lookups = newestEventLookups
            }
        }
    }

    let clock: @Sendable () -> Date
    let statistics: Statistics
    /// Told the events of every committed transaction, in commit order, before its callers resume.
    let observer: CommitObserver
    /// Whether a transaction may begin off the writer thread; told of the writer's commits.
    let gate: InlineCommitGate

    /// Runs `jobs` in as few transactions as possible (one, unless SQLite aborts a transaction).
    /// `inline` (not on the writer thread): a transaction that cannot begin without waiting is not
    /// begun, and the jobs from it on are returned unrun, for the writer thread (`InlineCommitGate`).
    @discardableResult
    func perform(_ jobs: [WriteJob], on db: SQLiteConnection, inline: Bool = false) -> ArraySlice<WriteJob> {
        var remaining = jobs[...]
        while !remaining.isEmpty {
            guard let rest = runTransaction(remaining, on: db, inline: inline) else { return remaining }
            remaining = rest
        }
        return []
    }

    /// Runs jobs from the front of `jobs` in one transaction; returns those it did not reach, or
    /// `nil` when an inline transaction could not begin (nothing ran).
    private func runTransaction(
        _ jobs: ArraySlice<WriteJob>, on db: SQLiteConnection, inline: Bool
    ) -> ArraySlice<WriteJob>? {
        var begin: InlineCommitGate.WriterBegin?  // the writer thread's: its commit may open the gate
        if inline {
            guard gate.beginInline(on: db) else { return nil }
        } else {
            begin = gate.writerBegins()
            do throws(SQLiteError) {
                try beginWaitingForTheLock(jobs, on: db)
            } catch {
                return failWaits(jobs, error)
            }
        }
        let began = db.dataVersion
        db.newestEvent.began(version: began)
        db.orderParts?.began(version: began, writes: db.orderRowWrites)
        if jobs.count == 1, let job = jobs.first {
            if runAlone(job, on: db, inline: inline), let begin { gate.writerCommitted(begin) }
            return []
        }
        var settled: [WriteOutcome] = []
        var events: [StoredEvent] = []
        var kept: [SQLiteOrderStore.Transaction] = []  // the closures whose work commits
        var index = jobs.startIndex
        while index < jobs.endIndex {
            let job = jobs[index]
            index += 1
            do throws(SQLiteError) {
                try db.execute("SAVEPOINT write_job")
            } catch {
                abort(settled, failure: error, on: db)
                job.fail(error.storeError)
                return jobs[index...]
            }
            let tx = SQLiteOrderStore.Transaction(db: db, clock: clock)
            let outcome = job.run(tx)
            tx.end()
            guard db.isInTransaction else {
                // SQLite rolled the whole transaction back after an error inside the closure
                // (disk full, I/O error…): the earlier closures' work is gone too.
                let failure = SQLiteError(
                    code: SQLITE_ABORT, message: "the transaction was rolled back after an error in another write")
                abort(settled, failure: failure, on: db)
                outcome.resume(outcome.succeeded ? failure.storeError : nil)
                return jobs[index...]
            }
            do throws(SQLiteError) {
                if !outcome.succeeded { try db.execute("ROLLBACK TO write_job") }
                try db.execute("RELEASE write_job")
            } catch {
                abort(settled + [outcome], failure: error, on: db)
                return jobs[index...]
            }
            settled.append(outcome)
            if outcome.succeeded {
                events += tx.appended  // a rolled-back closure's events never existed
                kept.append(tx)
            }
        }
        do throws(SQLiteError) {
            try db.execute("COMMIT")
        } catch {
            abort(settled, failure: error, on: db)
            return []
        }
        let version = db.dataVersion
        db.newestEvent.committed(version: version, lastEvent: events.last?.id.rawValue)
        for tx in kept { tx.committed(version: version) }
        if let begin { gate.writerCommitted(begin) }
        statistics.recordCommit(writes: settled.count, inline: inline, newestEventLookups: db.newestEvent.lookups)
        observer.committed(events)
        for outcome in settled { outcome.resume(nil) }
        return []
    }

    /// How much of a write's wait may be left when SQLite's busy handler gives up: it sleeps in
    /// steps of up to 100 ms (the last one cut to the timeout); a write with less than this left
    /// would get no real try of its own, so it fails with the batch.
    static let lockWaitSlack: Duration = .milliseconds(100)

    /// How long a write waits for another process's write lock in all: the busy timeout.
    private var lockBudget: Duration { .milliseconds(Int64(gate.busyTimeoutMilliseconds)) }

    /// `BEGIN IMMEDIATE` on the writer thread: it takes the write lock now, so no statement inside
    /// can fail later for want of it, and waits for another process's lock for what is left of the
    /// oldest job's wait. Each write waits for the lock up to the busy timeout in all, counted from
    /// when it was queued: while another process held the lock, each batch of 64 used to wait the
    /// whole timeout in turn, and a write queued behind others waited for theirs first (found by a
    /// review, 2026-12-05).
    private func beginWaitingForTheLock(_ jobs: ArraySlice<WriteJob>, on db: SQLiteConnection) throws(SQLiteError) {
        let now = ContinuousClock.now
        let oldest = jobs.lazy.map(\.queuedAt).min() ?? now
        let left = max(.zero, lockBudget - oldest.duration(to: now))
        // 0 clears SQLite's busy handler: one try, which still succeeds if the lock is free.
        db.setBusyTimeout(milliseconds: Int32(clamping: left.milliseconds))
        defer { db.setBusyTimeout(milliseconds: gate.busyTimeoutMilliseconds) }
        try SQLiteTransient.retrying { () throws(SQLiteError) in try db.execute("BEGIN IMMEDIATE") }
    }

    /// After `BEGIN IMMEDIATE` failed: fails the jobs it was for and returns the ones to try again.
    /// Another process's lock fails only the writes whose wait is spent (at least the oldest), and
    /// the others begin again with what is left of theirs; any other failure fails them all.
    private func failWaits(_ jobs: ArraySlice<WriteJob>, _ error: SQLiteError) -> ArraySlice<WriteJob> {
        guard error.primaryCode == SQLITE_BUSY else {
            for job in jobs { job.fail(error.storeError) }
            return []
        }
        let now = ContinuousClock.now
        let oldest = jobs.indices.min { jobs[$0].queuedAt < jobs[$1].queuedAt } ?? jobs.startIndex
        var rest: [WriteJob] = []
        for index in jobs.indices {
            let job = jobs[index]
            if index == oldest || job.queuedAt.duration(to: now) + Self.lockWaitSlack >= lockBudget {
                job.fail(error.storeError)
            } else {
                rest.append(job)
            }
        }
        return rest[...]
    }

    /// One job in the open transaction, without a savepoint: at low rates most batches hold one
    /// write, and `SAVEPOINT` + `RELEASE` were two of its eight statements. A closure that throws
    /// rolls the whole transaction back, which holds only its own work.
    /// Returns whether it committed.
    private func runAlone(_ job: WriteJob, on db: SQLiteConnection, inline: Bool) -> Bool {
        let tx = SQLiteOrderStore.Transaction(db: db, clock: clock)
        let outcome = job.run(tx)
        tx.end()
        guard outcome.succeeded else {
            if db.isInTransaction { try? db.execute("ROLLBACK") }
            outcome.resume(nil)  // resumes the caller with its closure's own error
            return false
        }
        guard db.isInTransaction else {
            let failure = SQLiteError(code: SQLITE_ABORT, message: "the transaction was rolled back after an error")
            outcome.resume(failure.storeError)
            return false
        }
        do throws(SQLiteError) {
            try db.execute("COMMIT")
        } catch {
            abort([outcome], failure: error, on: db)
            return false
        }
        let version = db.dataVersion
        db.newestEvent.committed(version: version, lastEvent: tx.appended.last?.id.rawValue)
        tx.committed(version: version)
        statistics.recordCommit(writes: 1, inline: inline, newestEventLookups: db.newestEvent.lookups)
        observer.committed(tx.appended)
        outcome.resume(nil)
        return true
    }

    /// Rolls the transaction back (if SQLite has not already) and resumes `settled` with `failure`.
    private func abort(_ settled: [WriteOutcome], failure: SQLiteError, on db: SQLiteConnection) {
        // A failed COMMIT (e.g. a deferred foreign key) leaves the transaction open: end it.
        if db.isInTransaction { try? db.execute("ROLLBACK") }
        for outcome in settled { outcome.resume(failure.storeError) }
    }
}
