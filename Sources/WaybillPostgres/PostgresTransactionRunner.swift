import Foundation
import WaybillStorage
import WaybillDomain

/// Runs one `read` or `write` closure in its own transaction on a worker's session: admission,
/// BEGIN, the closure, COMMIT, and the retries PostgreSQL calls for.
///
/// - A serialization failure or deadlock (40001, 40P01) runs the whole closure again (up to
///   `maximumAttempts` times): the server already rolled it back, and that is its documented remedy.
/// - A connection that broke before COMMIT was sent is reopened once and the closure rerun:
///   nothing of the first run can have committed. A connection that broke or timed out during
///   COMMIT leaves the outcome unknown: the caller gets `unavailable` and no rerun happens.
/// - Closures may therefore run more than once; they are plain functions of the store's state.
struct PostgresTransactionRunner: Sendable {
    enum Kind: Sendable {
        case read
        case write

        /// Readers see one snapshot for the whole closure, so its queries agree with each other.
        var begin: String {
            switch self {
            case .read: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
            case .write: "BEGIN"
            }
        }
    }

    static let maximumAttempts = 5
    /// A call that leaves the queue with less of its budget than this is refused as overloaded:
    /// load held it there, not PostgreSQL, and a BEGIN with a few milliseconds left would only
    /// time out and be taken for a dead server.
    static let minimumBudget: Duration = .milliseconds(300)
    /// A failure to reach PostgreSQL counts against its health (503 for every call on the node, all
    /// connections dropped) only when the call began with at least this much of its budget: a
    /// timeout with less says the queue was long, not that the server is gone.
    static let fairShare: Duration = .milliseconds(1500)
    /// The server's own timeouts end this long before the call's deadline, so a live but busy
    /// server always answers first (57014, 55P03: this call fails alone) instead of the client
    /// giving up on it and taking it for a dead one.
    static let serverMargin: Duration = .milliseconds(250)
    /// This runner's margin: `serverMargin`, unless a test widens it (a busy runner's thread held for
    /// 250 ms let the client's deadline come first in tests that ask which one does).
    var serverMargin: Duration = Self.serverMargin
    /// A shorter lock wait for this transaction (`PostgresOrderStore.write(changing:…)`: an order
    /// whose last write met the lock timeout is tried with a short one); `nil`: the usual.
    var lockTimeoutCap: Duration? = nil
    /// A transaction with less than this left when its closure returns is rolled back instead of
    /// committed: a COMMIT sent that late is likely to meet the deadline with its outcome unknown
    /// (503 "the outcome is unknown", and a client without an `Idempotency-Key` that retries may
    /// write twice), where a rollback is a definite "nothing was written" the client can retry.
    static let commitReserve: Duration = .milliseconds(100)

    /// BEGIN and the server-side bounds of this attempt, with the `statement_timeout` they leave
    /// in effect (ms): `statement_timeout` and `lock_timeout` end `serverMargin` before `deadline`
    /// (but never above the pool's). Not sent on their own: they go out with the transaction's
    /// first statement, in one pipeline (`Transaction.run`), and a setting made in a pipeline
    /// bounds the statements after it in the same pipeline.
    func begin(deadline: ContinuousClock.Instant) -> (statements: [PostgresStatement], statementTimeout: Int64) {
        var (statement, lock) = Self.timeouts(deadline: deadline, margin: serverMargin)
        if let cap = lockTimeoutCap { lock = max(50, min(lock, cap.milliseconds)) }
        // A call with its whole budget left gets the pool's own values, which every pool connection
        // starts with (`forPool`'s startup options; a proxy that dropped them is not supported,
        // docs/SCALING.md): no statement to set them (one statement fewer per transaction).
        if statement == PostgresConnectionSettings.statementTimeout.milliseconds
            && lock == PostgresConnectionSettings.lockTimeout.milliseconds
        {
            return ([PostgresStatement(kind.begin)], statement)
        }
        return ([PostgresStatement(kind.begin), Self.timeoutStatement(statement: statement, lock: lock)], statement)
    }

    /// The server-side bounds, in milliseconds, for statements sent now: they end `serverMargin`
    /// before `deadline`, never above the pool's own.
    static func timeouts(deadline: ContinuousClock.Instant, margin: Duration) -> (statement: Int64, lock: Int64) {
        let left = ContinuousClock.now.duration(to: deadline) - margin
        let statement = max(50, min(left.milliseconds, PostgresConnectionSettings.statementTimeout.milliseconds))
        // The lock wait ends first: a lock wait cut by the statement's timeout reads as 57014, and
        // a lock held for long would not be told apart (`PostgresError.isLockTimeout`).
        return (statement, max(50, min(statement - 100, PostgresConnectionSettings.lockTimeout.milliseconds)))
    }

    /// Sets both bounds for the rest of the transaction; in a pipeline, for the statements after it.
    static func timeoutStatement(statement: Int64, lock: Int64) -> PostgresStatement {
        PostgresStatement(
            "SELECT set_config('statement_timeout', $1, true), set_config('lock_timeout', $2, true)",
            [.text(String(statement)), .text(String(lock))])
    }

    let kind: Kind
    let clock: @Sendable () -> Date

    func run<T>(
        _ body: (PostgresOrderStore.Transaction) throws -> T, on session: PostgresSession,
        deadline: ContinuousClock.Instant
    ) -> Result<T, any Error> {
        let admission = session.health.admit()
        if case .refuse(let retryIn) = admission {
            return .failure(
                StoreError.unavailable("PostgreSQL is unreachable (next try in \(retryIn.milliseconds) ms)"))
        }
        var budget = ContinuousClock.now.duration(to: deadline)
        guard budget >= Self.minimumBudget else {
            if admission == .probe { session.health.probeAbandoned() }
            return .failure(
                StoreError.unavailable("the store is overloaded: the call waited too long for a connection"))
        }
        /// PostgreSQL could not be reached: evidence that it is down only if the attempt had time.
        func unreachable() {
            if budget >= Self.fairShare {
                session.health.failed()
            } else if admission == .probe {
                session.health.probeAbandoned()
            }
        }
        var attempts = 0
        var reopened = false
        while true {
            attempts += 1
            budget = ContinuousClock.now.duration(to: deadline)
            switch attempt(body, on: session, deadline: deadline) {
            case .finished(let result, let reachedServer):
                if reachedServer { session.health.succeeded() } else { unreachable() }
                return result
            case .busy(let result):
                // Neither up nor down: another worker's finding (a failure) stands.
                if admission == .probe { session.health.probeAbandoned() }
                return result
            case .retry(let failure):
                // Another attempt only with time for it: one started with a few milliseconds left
                // would time out and be taken for a dead server.
                let hasTime = ContinuousClock.now.duration(to: deadline) >= Self.minimumBudget
                if failure.kind == .connectionLost && !reopened && hasTime {
                    reopened = true
                    continue
                }
                if failure.isRetryable && attempts < Self.maximumAttempts && hasTime {
                    continue
                }
                if failure.isConnectionFailure { unreachable() } else { session.health.succeeded() }
                return .failure(failure.storeError)
            }
        }
    }

    private enum Attempt<T> {
        /// The call is over; `reachedServer` is false when PostgreSQL could not be reached.
        case finished(Result<T, any Error>, reachedServer: Bool)
        /// The call is over: the server answered this attempt's BEGIN, then did not answer a later
        /// statement or the COMMIT in time; or the closure sent nothing at all. Either says nothing
        /// about whether the server is up.
        case busy(Result<T, any Error>)
        /// Nothing committed and running again may succeed.
        case retry(PostgresError)
    }

    private func attempt<T>(
        _ body: (PostgresOrderStore.Transaction) throws -> T, on session: PostgresSession,
        deadline: ContinuousClock.Instant
    ) -> Attempt<T> {
        let db: PostgresConnection
        do throws(PostgresError) {
            db = try session.connection(deadline: deadline)
            // Never left so, but a transaction still open here would swallow this attempt's BEGIN.
            if db.isInTransaction { _ = try db.executeScript("ROLLBACK", deadline: deadline) }
        } catch {
            if error.kind == .connectionLost { return .retry(error) }
            return .finished(.failure(error.storeError), reachedServer: !error.isConnectionFailure)
        }
        let tx = PostgresOrderStore.Transaction(
            db: db, clock: clock, isWriter: kind == .write, deadline: deadline, serverMargin: serverMargin,
            begin: { begin(deadline: deadline) })
        tx.lockWaitCapped = lockTimeoutCap != nil
        let result = Result { try body(tx) }.mapError { $0.translatedForStore }
        tx.end()
        if let failure = tx.fatalFailure {
            rollBack(db, deadline: deadline)
            if failure.isRetryable || failure.kind == .connectionLost { return .retry(failure) }
            // No answer at all to the pipeline that carried the BEGIN (its server-side timeouts
            // bound every statement in it, so a live server answers before the deadline): as a
            // BEGIN that timed out, PostgreSQL is taken for unreachable.
            if failure.isConnectionFailure && tx.beginWentUnanswered {
                return .finished(.failure(failure.storeError), reachedServer: false)
            }
            if failure.sqlState == "25006", kind == .write {
                // A write refused as read-only: a standby under the primary's address (the old
                // primary back after a failover). Taken as the server gone, so every connection is
                // dropped and the next ones ask for a read-write server (`target_session_attrs`).
                return .finished(.failure(failure.storeError), reachedServer: false)
            }
            // The server answered BEGIN within this attempt: a later client-side timeout says it is
            // busy, not gone. Its own timeouts are set at BEGIN but count from each statement's
            // start, so a statement that starts late can outlast the call's deadline on a live
            // server (found by a review; it dropped every connection and refused every call).
            if failure.isConnectionFailure {
                if failure.kind == .timedOut { return .busy(.failure(failure.storeError)) }
                return .finished(.failure(failure.storeError), reachedServer: false)
            }
            // The closure may have caught the error and returned: its transaction is void all the same.
            if case .success = result { return .finished(.failure(failure.storeError), reachedServer: true) }
            return .finished(result, reachedServer: true)
        }
        // A closure that ran no statement never reached the server: its outcome says nothing
        // about the server's health (a probe among them lets the next call probe).
        guard tx.hasBegun || tx.finalAppend != nil else { return .busy(result) }
        guard case .success = result else {
            rollBack(db, deadline: deadline)
            return .finished(result, reachedServer: true)
        }
        if ContinuousClock.now.duration(to: deadline) < Self.commitReserve {
            rollBack(db, deadline: deadline)
            let late = StoreError.unavailable("no time was left to commit: nothing was written")
            return .finished(.failure(late), reachedServer: true)
        }
        do throws(PostgresError) {
            try tx.commit()
        } catch {
            if error.isRetryable {
                // A deadlock or serialization failure of the append (sent with the COMMIT) leaves the
                // transaction open and failed, and the next attempt takes the same connection.
                rollBack(db, deadline: deadline)
                return .retry(error)
            }
            if error.isConnectionFailure {
                let unknown = StoreError.unavailable("the connection was lost during COMMIT: the outcome is unknown")
                // A COMMIT that timed out reached a server that was answering a moment ago: slow
                // (a disk flush, a synchronous standby), not gone. Unless this pipeline carried the
                // BEGIN (a closure that ran no statement but appends) and even that went unanswered.
                if error.kind == .timedOut && !tx.beginWentUnanswered { return .busy(.failure(unknown)) }
                return .finished(.failure(unknown), reachedServer: false)
            }
            rollBack(db, deadline: deadline)
            return .finished(.failure(error.storeError), reachedServer: true)
        }
        return .finished(result, reachedServer: true)
    }

    /// Ends a transaction that must not commit, within the call's deadline (but given at least
    /// 100 ms, at most 1 s). A connection that cannot roll back by then is dropped instead, which
    /// rolls back just as well.
    private func rollBack(_ db: PostgresConnection, deadline: ContinuousClock.Instant) {
        guard db.isUsable, db.isInTransaction else { return }
        _ = try? db.executeScript("ROLLBACK", deadline: max(.now + .milliseconds(100), min(deadline, .now + .seconds(1))))
    }
}
