import Foundation
import WaybillDomain
import WaybillStorage

extension PostgresOrderStore {
    /// The handle a `read` or `write` closure receives: the store's operations on one
    /// connection, inside the transaction the store opened around the closure.
    ///
    /// Used only on the worker thread running the closure, and refused once the closure returned.
    /// Every operation translates `PostgresError` into `StoreError`, so closures can catch
    /// `StoreError.conflict` and carry on, as on SQLite: operations that may break a unique or
    /// foreign key rule run inside a savepoint, because on PostgreSQL any failed statement
    /// otherwise aborts the whole transaction.
    final class Transaction: StoreWriter {
        let db: PostgresConnection
        /// The time stamped on outbox events as `committed_at` and on logouts.
        let clock: @Sendable () -> Date
        /// Write transactions lock the orders they read (see `order(_:in:)`).
        let isWriter: Bool
        /// Every statement of the transaction must be answered by then.
        let deadline: ContinuousClock.Instant
        /// How long before `deadline` the server's own timeouts end (`PostgresTransactionRunner`).
        let serverMargin: Duration
        /// A failure that dooms the transaction whatever the closure does with the error it got:
        /// a lost connection, a serialization failure or deadlock (retry), or a server error
        /// that left the transaction aborted.
        private(set) var fatalFailure: PostgresError?
        private var isActive = true
        /// Orders as this transaction last read or wrote them (`loadOrder`), so `updateOrder` can
        /// compare with them instead of reading the row, its stages and documents again: each
        /// statement is a round trip to the server, and a write's round trips are what the event
        /// counter row waits through (docs/BENCHMARKS.md, two nodes).
        var loaded: [OrderID: Order] = [:]
        /// The receipt columns of the orders in `loaded`, as stored (`Order.seen` keeps only the
        /// receipt that counts for the driver it was read with).
        var loadedReceipts: [OrderID: OrderReceipt.Columns] = [:]

        /// The transaction's BEGIN and its timeouts, not sent yet: they go out in one pipeline with
        /// the first statement (so a transaction costs no round trip of its own), made when that
        /// statement is sent so that the timeouts count from then. `nil` once sent. A transaction
        /// that never runs a statement never begins.
        private var pendingBegin: (() -> (statements: [PostgresStatement], statementTimeout: Int64))?
        /// Writes whose outcome is known before they are sent (`deferWrite`), to go out with the
        /// next statement that is waited for, or with the COMMIT.
        private var deferred: [PostgresStatement] = []
        /// The pipeline that carried the BEGIN got no answer (the connection broke or timed out):
        /// the server may be gone, where a failure after it says only that it is busy.
        private(set) var beginWentUnanswered = false
        /// The `statement_timeout` the server applies to this transaction's statements, in ms.
        private(set) var statementTimeout = PostgresConnectionSettings.statementTimeout.milliseconds
        /// The BEGIN shortened the lock wait (`PostgresTransactionRunner.lockTimeoutCap`): meant for
        /// the order row's read only, so the append and the COMMIT get the usual one back
        /// (`freshTimeouts`). A short wait for the event counter row would pause an order whose
        /// own row is free (a review, 2026-12-06).
        var lockWaitCapped = false

        init(
            db: PostgresConnection, clock: @escaping @Sendable () -> Date, isWriter: Bool,
            deadline: ContinuousClock.Instant, serverMargin: Duration = PostgresTransactionRunner.serverMargin,
            begin: (() -> (statements: [PostgresStatement], statementTimeout: Int64))?
        ) {
            self.serverMargin = serverMargin
            self.db = db
            self.clock = clock
            self.isWriter = isWriter
            self.deadline = deadline
            self.pendingBegin = begin
        }

        /// Sends `statements` after the BEGIN (if not sent yet) and whatever is deferred, in one
        /// round trip, and returns their results. A failure of a pipeline that carried the BEGIN
        /// dooms the transaction, whatever the error: what follows would otherwise run outside it.
        func run(_ statements: [PostgresStatement]) throws(PostgresError) -> [PostgresResult] {
            let made = pendingBegin?()
            let begin = made?.statements ?? []
            if let made { statementTimeout = made.statementTimeout }
            guard !begin.isEmpty || !deferred.isEmpty else { return try db.executePipeline(statements, deadline: deadline) }
            let queued = begin + deferred
            let unsent = (begin: pendingBegin, deferred: deferred)
            pendingBegin = nil
            deferred = []
            do throws(PostgresError) {
                // The BEGIN's answer is asked for at once (a Flush): a deadline met after it says
                // the server is busy, one met before it that the server may be gone.
                let results = try db.executePipeline(queued + statements, flushingAfter: begin.count, deadline: deadline)
                return Array(results.dropFirst(queued.count))
            } catch {
                if error.kind == .invalidValue {
                    // Refused before anything was sent (a text with a NUL): nothing happened yet.
                    (pendingBegin, deferred) = unsent
                    throw error
                }
                if !begin.isEmpty {
                    if fatalFailure == nil { fatalFailure = error }
                    beginWentUnanswered = error.isConnectionFailure && db.answeredInLastPipeline < begin.count
                }
                throw error
            }
        }

        /// The statement that lowers the transaction's timeouts to what is left of the call, when
        /// the ones in effect could outlast it by more than a little of the server's margin: put
        /// in front of a pipeline that may wait for a lock (the append and the COMMIT), so that a
        /// live server answers "nothing was written" (55P03) before the caller's deadline, rather
        /// than the deadline leaving the outcome unknown.
        func freshTimeouts() -> PostgresStatement? {
            let (statement, lock) = PostgresTransactionRunner.timeouts(deadline: deadline, margin: serverMargin)
            guard statementTimeout - statement > 100 || lockWaitCapped else { return nil }
            lockWaitCapped = false
            statementTimeout = statement
            return PostgresTransactionRunner.timeoutStatement(statement: statement, lock: lock)
        }

        /// Whether the BEGIN was sent: the closure ran at least one statement.
        var hasBegun: Bool { pendingBegin == nil }

        /// Queues a write whose answer is known before it is sent (an `UPDATE` of a row this
        /// transaction holds locked), to go out with the next statement: a write that appends its
        /// events then costs one round trip for both. Its failure is thrown by that statement.
        func deferWrite(_ statement: PostgresStatement) {
            deferred.append(statement)
        }

        /// Puts `statement` in front of the deferred writes (after the BEGIN, if not sent yet).
        func deferFirst(_ statement: PostgresStatement) {
            deferred.insert(statement, at: 0)
        }

        var hasDeferredWrites: Bool { !deferred.isEmpty }

        /// The events `appendAtCommit` put off to the COMMIT.
        var finalAppend: PendingAppend?

        /// Called by the store when the closure returned: later use throws.
        func end() { isActive = false }

        /// Runs one store operation, translating PostgreSQL failures at the protocol boundary.
        /// - Parameter savepoint: run it inside a savepoint, so its failure (a conflict) leaves
        ///   the transaction usable. Costs two round trips; only for statements that may break a rule.
        func perform<T>(
            savepoint: Bool = false, _ operation: () throws(PostgresError) -> T
        ) throws(StoreError) -> T {
            guard isActive else {
                throw .unavailable("a store transaction was used after its closure returned")
            }
            if let fatalFailure {
                if fatalFailure.isRetryable || fatalFailure.isConnectionFailure { throw fatalFailure.storeError }
                throw .unavailable("the transaction was rolled back after an earlier error")
            }
            let guarded = savepoint && isWriter
            var savepointTaken = false
            do throws(PostgresError) {
                // With whatever is deferred (the BEGIN, a deferred write), whose failure the
                // savepoint must not catch: it comes before the savepoint, and fails this call
                // with the transaction left failed.
                if guarded {
                    _ = try run([PostgresStatement("SAVEPOINT wb_operation")])
                    savepointTaken = true
                }
                let value = try operation()
                if guarded { try db.executeScript("RELEASE SAVEPOINT wb_operation", deadline: deadline) }
                return value
            } catch {
                // Any failure once the savepoint is taken, the server's or ours (a value refused
                // before it was sent): a savepoint left open would later catch what it must not.
                // Writes deferred inside the savepoint go with it.
                if savepointTaken { deferred.removeAll() }
                if savepointTaken && db.isUsable {
                    _ = try? db.executeScript(
                        "ROLLBACK TO SAVEPOINT wb_operation; RELEASE SAVEPOINT wb_operation", deadline: deadline)
                }
                // A write refused as read-only dooms the call even when a savepoint caught it: the
                // server is a standby, and only new connections find the primary (the runner).
                if error.isRetryable || error.isConnectionFailure || !db.isUsable || db.isInFailedTransaction
                    || error.sqlState == "25006"
                {
                    fatalFailure = error
                }
                throw error.storeError
            }
        }

        // MARK: Shorthands for the extensions (the transaction's deadline on every call)

        func execute(_ sql: String, _ arguments: [PostgresValue] = []) throws(PostgresError) -> PostgresResult {
            try run([PostgresStatement(sql, arguments)])[0]
        }

        func query<T>(
            _ sql: String, _ arguments: [PostgresValue] = [], _ decode: (PostgresRow) throws(PostgresError) -> T
        ) throws(PostgresError) -> [T] {
            try execute(sql, arguments).rows(decode)
        }

        func queryFirst<T>(
            _ sql: String, _ arguments: [PostgresValue] = [], _ decode: (PostgresRow) throws(PostgresError) -> T
        ) throws(PostgresError) -> T? {
            try query(sql, arguments, decode).first
        }
    }
}

/// The row an `INSERT … RETURNING` must have produced.
func required<T>(_ value: T?, _ table: String) throws(PostgresError) -> T {
    guard let value else { throw PostgresError(.invalidValue, message: "no row returned by an insert into \(table)") }
    return value
}
