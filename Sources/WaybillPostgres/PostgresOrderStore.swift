public import Foundation
import Synchronization
public import WaybillDomain
public import WaybillStorage

/// The cluster order store: PostgreSQL shared by several Waybill nodes.
///
/// Behaves like `SQLiteOrderStore` (same protocol, same observable results); what differs is
/// how it stays correct with other nodes writing the same database:
/// - `write` runs each closure in its own transaction on one of `writerCount` writer threads
///   (no group commit: row locks held across several callers' closures could deadlock between
///   nodes). Inside a write, `order(_:in:)` locks the order row, so two nodes' read-modify-write
///   of one order serialize instead of losing an update.
/// - Event ids come from a one-row counter taken as the last step of the transaction, so they
///   increase in commit order across nodes (see docs/DESIGN.md, "Event ids").
/// - `read` runs on one of `readerCount` reader threads in a REPEATABLE READ, READ ONLY
///   transaction: one snapshot for the whole closure.
///
/// Every blocking libpq call runs on the store's own threads, never on Swift's cooperative
/// pool, and every call is bounded: a call that PostgreSQL has not answered 4.5 s after it was
/// made fails with `StoreError.unavailable` (the API's 503). Once the server is known to be
/// down, calls fail at once, and one probe every 0.2–2 s finds it back: the store recovers by
/// itself, without a restart.
///
/// ```swift
/// let store = try PostgresOrderStore(url: "postgresql://waybill@127.0.0.1:5432/waybill")
/// let company = try await store.write { tx in try tx.insertCompany(name: "Acme") }
/// ```
public final class PostgresOrderStore: OrderStore {
    /// How long after it was made a call may still be answered (queue wait included), so that a
    /// write fails within 5 s when the server hangs.
    public static let defaultCallBudget: Duration = .milliseconds(4500)
    /// This store's budget per call (`defaultCallBudget` unless the opener chose another).
    private let callBudget: Duration
    /// This store's bound on one connect (`defaultConnectTimeout` unless the opener chose another).
    private let connectTimeout: Duration
    /// The orders with a write running on this node (`write(changing:in:appendingEvents:)`).
    private let orderWrites = KeyedGate<OrderTurn>()
    /// Orders whose last write here met the lock timeout (55P03), each with the end of its pause:
    /// until then their writes are refused at once; after it, one is tried with a short lock wait
    /// (`probeLockTimeout`). A try that locks the row removes the order (`write(changing:in:appendingEvents:)`).
    private let lockedOrders = Mutex<[OrderTurn: ContinuousClock.Instant]>([:])
    static let lockedOrderPause: Duration = .seconds(1)
    static let probeLockTimeout: Duration = .milliseconds(200)

    private let writeQueue = JobQueue<PostgresJob>()
    private let readQueue = JobQueue<PostgresJob>()
    /// Reads waiting for a reader (tests watch it).
    var queuedReads: Int { readQueue.count }
    private let workers: [PostgresWorker]
    private let settings: PostgresConnectionSettings
    private let clock: @Sendable () -> Date
    private let isClosed = Mutex(false)
    private let leases = Mutex<[WeakLease]>([])
    /// The reader kept for urgent reads, as the store's health shows it.
    private let keptReader: KeptReader

    /// Connects, applies pending migrations, and starts the worker threads.
    ///
    /// Blocks the calling thread while it connects (at most `connectTimeout`, 2 s by default) and
    /// migrates (once, at start; waiting up to 25 s for another node that is migrating). Several
    /// nodes may start at once: migrations run under an advisory lock.
    /// - Parameters:
    ///   - url: `postgresql://user[:password]@host[:port]/database` (or `postgres://`); query
    ///     items are passed to libpq as connection keywords (e.g. `?sslmode=require`).
    ///   - applicationName: shown in `pg_stat_activity` (use one per node).
    ///   - writerCount: writer threads (connections); 2–4 suit the one-row event counter best.
    ///   - readerCount: reader threads (connections), and one more kept for `urgentRead`s that
    ///     find every other reader busy (the live path's reads behind a reconnect storm's replays).
    ///   - callBudget: how long a call may take, queue wait included, before it fails with
    ///     `StoreError.unavailable` (the 5 s failure contract; tests that are not about it give more).
    ///   - connectTimeout: how long one connect may take (at open, a connection a call opens, within
    ///     its budget, the kept reader's and a lease's) before the server counts as unreachable:
    ///     2 s, so a frozen server fails a call inside the 5 s contract. Must be positive. More than
    ///     the call budget only lengthens the open and the connects made outside calls (the kept
    ///     reader's, which an urgent read may wait behind). Tests that are not about it give more:
    ///     on a busy 2-core runner, a suite opening many stores at once had a connect take longer.
    ///   - clock: the time stamped on events as `committed_at` and on logouts.
    /// - Throws: `StoreError.unavailable` with one line saying why: a malformed URL, a server
    ///   that cannot be reached, refused credentials, or a failed migration.
    public convenience init(
        url: String, applicationName: String = "waybill", writerCount: Int = 4, readerCount: Int = 4,
        callBudget: Duration = PostgresOrderStore.defaultCallBudget,
        connectTimeout: Duration = PostgresOrderStore.defaultConnectTimeout,
        clock: @escaping @Sendable () -> Date = { Date() }
    ) throws {
        try self.init(
            url: url, applicationName: applicationName, writerCount: writerCount, readerCount: readerCount,
            callBudget: callBudget, connectTimeout: connectTimeout, clock: clock, keptReader: KeptReader.Timing())
    }

    /// How long one connect may take by default (`init(url:…)`'s `connectTimeout`).
    public static let defaultConnectTimeout: Duration = PostgresSession.defaultConnectTimeout

    /// `init(url:…)` with the kept reader's checks on another schedule (tests).
    init(
        url: String, applicationName: String, writerCount: Int, readerCount: Int, callBudget: Duration,
        connectTimeout: Duration,
        clock: @escaping @Sendable () -> Date, keptReader timing: KeptReader.Timing
    ) throws {
        guard connectTimeout > .zero else {
            throw StoreError.unavailable("invalid PostgreSQL connect timeout: \(connectTimeout) (it must be positive)")
        }
        self.callBudget = callBudget
        self.connectTimeout = connectTimeout
        let parsed: PostgresConnectionSettings
        do throws(PostgresURLError) {
            parsed = try PostgresConnectionSettings(url: url, applicationName: applicationName)
        } catch {
            throw StoreError.unavailable("invalid PostgreSQL URL: \(error.description)")
        }
        settings = parsed
        self.clock = clock
        do throws(PostgresError) {
            let db = try PostgresConnection(parsed.forPool, deadline: .now + connectTimeout)
            defer { db.close() }
            try Self.requireUTF8(db)
            try PostgresMigrations.apply(to: db, at: clock(), deadline: .now + .seconds(30))
        } catch {
            throw StoreError.unavailable("cannot open PostgreSQL at \(parsed.displayName): \(error.message)")
        }
        let health = PostgresHealth()
        let keptReader = KeptReader(timing: timing)
        self.keptReader = keptReader
        let writeQueue = self.writeQueue, readQueue = self.readQueue
        workers =
            (0..<max(1, writerCount)).map { index in
                PostgresWorker(
                    name: "waybill.postgres.writer.\(index)", queue: writeQueue, settings: parsed.forPool,
                    health: health, connectTimeout: connectTimeout)
            }
            + (0..<max(1, readerCount)).map { index in
                PostgresWorker(
                    name: "waybill.postgres.reader.\(index)", queue: readQueue, settings: parsed.forPool,
                    health: health, connectTimeout: connectTimeout)
            }
            + [
                PostgresWorker(
                    name: "waybill.postgres.reader.urgent", queue: readQueue, settings: parsed.forPool,
                    health: health, connectTimeout: connectTimeout, kept: keptReader)
            ]
    }

    deinit { close() }

    /// Refuses a database whose encoding is not UTF-8: text any client may send (an emoji in a
    /// title) would then fail inside a write (22P05) as a server error, where SQLite stores it.
    static func requireUTF8(_ db: PostgresConnection) throws(PostgresError) {
        let encoding = try db.queryFirst("SHOW server_encoding", deadline: .now + .seconds(5)) { $0.text(0) }
        guard encoding == "UTF8" else {
            throw PostgresError(
                .invalidValue,
                message: "the database's encoding is \(encoding ?? "unknown"), not UTF8: create it with ENCODING 'UTF8'")
        }
    }

    /// Runs `body` on a reader thread in one REPEATABLE READ snapshot, then resumes the caller.
    /// - Throws: `StoreError` (`.unavailable` when PostgreSQL cannot answer in time), or
    ///   whatever `body` throws.
    public func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await submit(.read, to: readQueue) { tx in try body(tx) }
    }

    /// `read` ahead of the queued reads that are not urgent (`OrderStore.urgentRead`).
    public func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await submit(.read, to: readQueue, urgent: true) { tx in try body(tx) }
    }

    /// Runs `body` on a writer thread in its own transaction and resumes the caller once it
    /// committed.
    ///
    /// `body` may run more than once: after a serialization failure or deadlock, or after the
    /// connection broke before COMMIT was sent, the whole closure runs again in a new
    /// transaction. If the connection breaks during COMMIT the caller gets `.unavailable`
    /// although the transaction may have committed (the outcome cannot be known).
    /// - Throws: `StoreError`, or whatever `body` throws (the transaction is rolled back).
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T {
        try await submit(.write, to: writeQueue) { tx in try body(tx) }
    }

    /// `write`, with the events `body` returns appended in the same round trip as the COMMIT
    /// (`Transaction.appendAtCommit`): the event counter row, which every writer of every node
    /// waits for, is held only while PostgreSQL runs the two, never across a round trip.
    public func write<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        try await submitAppending(body)
    }

    /// A write whose events go out with its COMMIT (`write(appendingEvents:)`), with the call's
    /// `deadline` (from now by default) and an optional shorter lock wait; a probe of paused
    /// orders locks their rows first and notes that it did (`write(changing:in:appendingEvents:)`).
    private func submitAppending<T: Sendable>(
        _ body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent]),
        deadline: ContinuousClock.Instant? = nil, lockTimeoutCap: Duration? = nil,
        probe: (orders: [OrderTurn], outcome: ProbeOutcome)? = nil
    ) async throws -> (T, [StoredEvent]) {
        let (value, append) = try await submit(.write, to: writeQueue, deadline: deadline, lockTimeoutCap: lockTimeoutCap) { tx in
            if let probe {
                // Afresh at each run: the runner runs the closure again after a lost connection
                // or a deadlock, and only this run's locks say anything (a review).
                probe.outcome.reset()
                try tx.lockOrders(probe.orders) { probe.outcome.locked($0) }
            }
            let (value, events) = try body(tx)
            return (value, try tx.appendAtCommit(events))
        }
        return (value, append?.stored ?? [])
    }

    /// `write(appendingEvents:)`, one write per order at a time on this node (`KeyedGate`); the
    /// wait for its turns counts in the call's budget. A write of several orders (a driver's
    /// receipts) takes all of their turns at once, holding none while it waits for one
    /// (`KeyedGate.enterAll`).
    ///
    /// An order whose write met the lock timeout is paused (`lockedOrders`): for a second its
    /// writes are refused at once, then one is tried with a lock wait of 200 ms, and so on until
    /// one finds the row free. Why: the turns keep a locked order to one writer connection, but
    /// with a steady stream of writes to it that writer is never free, and a node cut off in the
    /// middle of several transactions (one per writer of its own) leaves as many orders locked
    /// for about 10 s: they took every writer of another node again (a review, 2026-12-05).
    /// Paused, a locked order holds a writer about 200 ms every 1.2 s. (A deadlock met during such
    /// a short wait reads as a lock timeout, 55P03, and pauses the order instead of being retried.)
    ///
    /// The try locks the paused rows itself, first, one at a time in id order
    /// (`Transaction.lockOrders`), and only those locks change the pauses: each row locked was
    /// free (its pause ends, whatever the write does next), and a lock timeout among them was
    /// the next row's (paused again). A write's own statements may not wait for a row (a
    /// receipt's conditional `UPDATE` skips one it does not apply to), so their outcome would end
    /// a pause without having met the lock (a review, 2026-12-06). The lock timeout of a write
    /// that probes nothing pauses its order only when it names one: of several, it cannot tell
    /// which row was locked, and a pause refuses every write of its order.
    ///
    /// Turns and pauses are keyed by the company with the id (`OrderTurn`): a request naming
    /// another company's order never waits behind that company's writes to it, never takes its
    /// probe, and is not refused for its pause; its transaction finds no such order of its own
    /// company, and its probe's lock names the company too, so it locks nothing of the other's.
    public func write<T: Sendable>(
        changing orders: [OrderID], in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        let deadline = ContinuousClock.now + callBudget
        let keys = Set(orders.map { OrderTurn(company: company.rawValue, order: $0.rawValue) }).sorted()
        _ = try probing(keys)
        try await orderWrites.enterAll(keys, until: deadline) {
            StoreError.unavailable("the call waited too long for another write to the same order")
        }
        defer { for key in keys { orderWrites.leave(key) } }
        let probes = try probing(keys)  // a pause may have begun while this waited
        guard !probes.isEmpty else {
            do {
                return try await submitAppending(body, deadline: deadline)
            } catch let error as StoreError where PostgresError.isLockTimeout(error) && keys.count == 1 {
                pause(keys[0])
                throw error
            }
        }
        let outcome = ProbeOutcome()
        do {
            let written = try await submitAppending(
                body, deadline: deadline, lockTimeoutCap: Self.probeLockTimeout, probe: (probes, outcome))
            endPauses(probes)
            return written
        } catch {
            // The rows locked were free: whatever failed after says nothing of them. A lock timeout
            // right after them was the next row's, in id order: paused again. Rows not tried stay
            // as they were (the server down, the call out of time).
            let free = outcome.lockedOrders
            endPauses(free)
            if let error = error as? StoreError, PostgresError.isLockTimeout(error), free.count < probes.count {
                pause(probes[free.count])
            }
            throw error
        }
    }

    /// The paused rows a probe's run locked, in id order; written on the writer thread, read after.
    final class ProbeOutcome: Sendable {
        private let locked = Mutex<[OrderTurn]>([])
        func reset() { locked.withLock { $0 = [] } }
        func locked(_ order: OrderTurn) { locked.withLock { $0.append(order) } }
        var lockedOrders: [OrderTurn] { locked.withLock { $0 } }
    }

    private func endPauses(_ keys: [OrderTurn]) {
        guard !keys.isEmpty else { return }
        lockedOrders.withLock { paused in
            for key in keys { paused[key] = nil }
        }
    }

    /// Pauses `key`'s order until `until`, `lockedOrderPause` from now unless a test sets another
    /// (`write(changing:in:appendingEvents:)`).
    private func pause(_ key: OrderTurn, until: ContinuousClock.Instant = .now + lockedOrderPause) {
        let now = ContinuousClock.now
        lockedOrders.withLock { paused in
            paused[key] = until
            // Orders nobody wrote again stay until a write finds them: bounded all the same.
            if paused.count > 1024 { paused = paused.filter { now < $0.value + .seconds(30) } }
        }
    }

    /// Pauses `order` as its lock timeout would, until `until` (tests).
    func pause(_ order: Order, until: ContinuousClock.Instant) { pause(OrderTurn(order), until: until) }

    /// Writes waiting for `order`'s turn now (tests).
    func writesWaiting(for order: Order) -> Int { orderWrites.waiting(for: OrderTurn(order)) }

    /// Whether a write of `order` holds its turn now (tests).
    func isWriting(_ order: Order) -> Bool { orderWrites.isHeld(OrderTurn(order)) }

    /// Whether `order` is paused, or its pause is over and its next write probes (tests).
    func isPaused(_ order: Order) -> Bool { lockedOrders.withLock { $0[OrderTurn(order)] != nil } }

    /// Those of `keys`' orders that were paused for a lock timeout and whose pause is over (try
    /// them with a short lock wait); throws while any pause lasts. A pause over for 30 s is
    /// forgotten: a cut node's lock lasts about 10 s, and a write months later should not get the
    /// short wait.
    private func probing(_ keys: [OrderTurn]) throws -> [OrderTurn] {
        let now = ContinuousClock.now
        let (over, lasting) = lockedOrders.withLock { paused -> ([OrderTurn], Bool) in
            var over: [OrderTurn] = []
            for key in keys {
                guard let until = paused[key] else { continue }
                if now >= until + .seconds(30) {
                    paused[key] = nil
                } else if now < until {
                    return ([], true)
                } else {
                    over.append(key)
                }
            }
            return (over, false)
        }
        guard !lasting else {
            throw StoreError.unavailable(
                "the order stays locked by another transaction (a node cut off, or a stalled database); try again shortly")
        }
        return over
    }

    private func submit<T: Sendable>(
        _ kind: PostgresTransactionRunner.Kind, to queue: JobQueue<PostgresJob>, urgent: Bool = false,
        deadline: ContinuousClock.Instant? = nil, lockTimeoutCap: Duration? = nil,
        _ body: @escaping @Sendable (Transaction) throws -> T
    ) async throws -> T {
        var runner = PostgresTransactionRunner(kind: kind, clock: clock)
        runner.lockTimeoutCap = lockTimeoutCap
        let configured = runner
        let deadline = deadline ?? ContinuousClock.now + callBudget
        return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            let job = PostgresJob { session in
                continuation.resume(with: configured.run(body, on: session, deadline: deadline))
            }
            if !queue.enqueue(job, urgent: urgent) { continuation.resume(throwing: StoreError.unavailable("the store is closed")) }
        }
    }

    /// Lets queued calls finish, stops every thread and closes every connection, leases
    /// included (their advisory locks are freed with their sessions). Later calls throw
    /// `StoreError.unavailable`. Idempotent.
    ///
    /// Blocks until the store's threads have stopped; never call it from inside a closure.
    public func close() {
        let wasOpen = isClosed.withLock { closed in
            defer { closed = true }
            return !closed
        }
        guard wasOpen else { return }
        writeQueue.close()
        readQueue.close()
        for lease in leases.withLock({ $0.compactMap(\.lease) }) { lease.shutDown() }
        for worker in workers where !worker.isCurrentThread { worker.waitUntilFinished() }
    }

    /// A warning while the reader kept for urgent reads has no connection (its connect failed: the
    /// server out of connection slots, or down): the live path's reads then wait for a busy
    /// reader, or for a connect. Not a problem: the store still answers every call.
    public var health: StoreHealth {
        StoreHealth(warnings: keptReader.isUnconnected ? ["postgres_urgent_reader_unconnected"] : [])
    }

    /// A cluster-wide lease: a PostgreSQL session advisory lock on a dedicated connection with a
    /// heartbeat (see `PostgresLease`).
    public func lease(_ name: String) -> any Lease { lease(name, confirmationLifetime: PostgresLease.confirmationLifetime) }

    /// A lease whose heartbeat confirmations last `confirmationLifetime` (tests).
    func lease(_ name: String, confirmationLifetime: Duration) -> PostgresLease {
        let lease = PostgresLease(
            name: name, settings: settings.forLease, confirmationLifetime: confirmationLifetime,
            connectTimeout: connectTimeout)
        let open = isClosed.withLock { closed in
            if !closed { leases.withLock { $0 = $0.filter { $0.lease != nil } + [WeakLease(lease: lease)] } }
            return !closed
        }
        if !open { lease.shutDown() }
        return lease
    }
}

/// A lease the store shuts down when it closes, without keeping it alive.
private struct WeakLease: Sendable {
    weak var lease: PostgresLease?
}

/// One order's write turn on a node (`PostgresOrderStore.write(changing:in:appendingEvents:)`):
/// the company the caller acts for, and the id. Ids are unique across companies, so the company
/// adds nothing for the order's own writes; it keeps a request that names another company's order
/// off that order's turn and pause.
struct OrderTurn: Hashable, Comparable, Sendable {
    let company: Int64
    let order: Int64

    init(company: Int64, order: Int64) {
        self.company = company
        self.order = order
    }

    /// A stored order's own turn (tests).
    init(_ order: Order) { self.init(company: order.companyID.rawValue, order: order.id?.rawValue ?? 0) }

    /// In id order: a write of several orders (one company's) takes their turns and locks their
    /// rows in this order, as every other such write does.
    static func < (a: OrderTurn, b: OrderTurn) -> Bool { (a.order, a.company) < (b.order, b.company) }
}
