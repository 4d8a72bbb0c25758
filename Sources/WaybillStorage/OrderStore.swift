public import Foundation
public import WaybillDomain

/// The system of record: companies, users, credentials, orders and the event outbox.
///
/// Nobody holds a connection. `read` and `write` run a synchronous closure on the store's own
/// thread(s) and resume the caller when it returns, so a transaction cannot outlive the call and
/// never contains an `await`. Blocking C calls never run on Swift's cooperative pool.
///
/// Implementations: `SQLiteOrderStore` (embedded default, one process) and `PostgresOrderStore`
/// (several nodes). Callers never know which one they have.
public protocol OrderStore: Sendable {
    /// Runs `body` in a read-only snapshot (concurrent with other reads and with the writer).
    /// - Throws: `StoreError`, or whatever `body` throws.
    func read<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T

    /// `read`, queued ahead of every read that is not urgent itself: for the live path (the hub
    /// feed, the outbox relay, the session watcher), whose reads waited behind everything else on
    /// the node, so a reconnect storm's replays and list fetches held delivery back for seconds,
    /// right after the failures the live path is there for (found by a review, 2026-12-05).
    func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T

    /// Runs `body` in one transaction and commits if it returns; rolls back if it throws.
    ///
    /// The order row and its outbox records commit together or not at all. `body` must not block
    /// on anything but the store: no network, no `await`.
    /// - Throws: `StoreError`, or whatever `body` throws.
    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) async throws -> T

    /// `write`, with the events `body` returns appended as the transaction's last step (as
    /// `appendEvents` would: ids in commit order), and the stored events returned with `body`'s value.
    ///
    /// The same as calling `appendEvents` last inside `write` (the default does exactly that), but
    /// a store may send the append with its COMMIT: PostgreSQL then holds the event counter row,
    /// which every writer of every node waits for, for no round trip to the client.
    func write<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent])

    /// `write(appendingEvents:)` for a write that changes the orders `orders` of `company` (and
    /// locks their rows) and no other. A store with several writer connections runs at most one
    /// such write per order at a time on this process, and keeps the others waiting without a
    /// connection, within the same budget (`KeyedGate`): a row lock held for long, by a transaction
    /// of a node cut off from the database, then holds up the writes to that order only, not every
    /// write of the node. The default is `write(appendingEvents:)` (one writer: writes serialize
    /// anyway). A write of one order (an order's change) or of several (a driver's receipts).
    ///
    /// The turns are the company's and the id's together: a request naming another company's order
    /// (which the store then does not find in the caller's company) never waits for, or holds up,
    /// that company's writes to it (a tenancy review, 2026-12-07).
    func write<T: Sendable>(
        changing orders: [OrderID], in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent])

    /// `write`, run and committed on the calling thread before it returns, when the store can do
    /// that without waiting (SQLite: task code the service thread runs for the idle writer,
    /// `WriterExecutor.runHere`); `nil`, with nothing run, otherwise: the caller then uses `write`.
    /// For a request answered without a task (`HTTPResponder.respondNow`). The default: `nil`.
    func writeNow<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) throws -> T?

    /// Closes every connection. Later calls throw `StoreError.unavailable`.
    func close()

    /// A cluster-wide lease called `name`: among every process on this store, at most one holds
    /// it at a time (the outbox relay and the pruner run only while they hold theirs).
    ///
    /// Embedded stores serve one process, so theirs is a local lock; PostgreSQL's is an advisory
    /// lock on a dedicated session with a heartbeat. Each call returns a new, unheld lease.
    func lease(_ name: String) -> any Lease

    /// Problems the store knows of while it still answers (see `StoreHealth`). Cheap: no query.
    var health: StoreHealth { get }

    /// Asks the store to call `observer` after every commit of this process, with the events that
    /// commit appended, **in commit (and so id) order**, before the writers are resumed. Returns
    /// whether it will: a store that cannot promise that order (several writer threads) says no,
    /// and its events reach the hub through the relay and the broker only.
    ///
    /// The observer runs on the store's writer thread: it must be quick and never block (the
    /// server's hands events to the hub feed, which only queues them for the service thread).
    /// At most one observer: a second call is refused (`false`), so a second server on the same
    /// store keeps the relay's path and misses nothing.
    func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool

    /// Removes the commit observer (its server stops): the store no longer holds the server, and a
    /// later server on the same store may observe commits again.
    func stopObservingCommits()

    /// An executor on the store's writer thread, or `nil`. A task that prefers it
    /// (`Task(executorPreference:)`) runs its code between the writer's transactions, so its
    /// `write` calls are queued, committed and resumed without waking another thread: the server
    /// runs each write request that way (docs/DESIGN.md, "Run to completion"). Such a task
    /// must never block the thread (it would stall every write); it may await anything.
    var writerExecutor: (any WriterExecutor)? { get }
}

/// A store's writer thread as an executor (`OrderStore.writerExecutor`).
public protocol WriterExecutor: TaskExecutor {
    /// Sets what the writer thread runs at the points of each batch of work it takes from its
    /// queue (`WriterBatchPoint`). Returns `false` if an observer is set already. The server uses
    /// it to wake its service thread once per burst of answers and event frames instead of once
    /// per post (`HTTPServer.beginPostingBatch` and its siblings).
    func observeBatches(_ observer: @escaping @Sendable (WriterBatchPoint) -> Void) -> Bool
    /// Removes the observer (the server stops); a later `observeBatches` may set a new one.
    func stopObservingBatches()
    /// Calls `start`, which starts a task on this executor, so that the task's work runs on the
    /// calling thread when the writer thread is idle, instead of waking the writer: its code, its
    /// transaction (if that can begin and commit without waiting for a lock or the disk) and its
    /// code after it. `start` gets `true` then, inside the scope where this thread runs the
    /// writer's work: the caller starts the task at once (`Task.immediate`), and whatever the task
    /// queued meanwhile runs here too before `runHere` returns. It gets `false` while the writer is
    /// busy: the task is queued as usual. Whatever cannot run here goes to the writer thread. For
    /// a caller whose thread must not block and that has nothing else to do meanwhile (the
    /// server's service thread with no other request running; docs/DESIGN.md, "Writes on the
    /// service thread").
    func runHere(_ start: (_ here: Bool) -> Void)
}

extension WriterExecutor {
    /// Only starts the task: its work runs on the writer thread.
    public func runHere(_ start: (_ here: Bool) -> Void) { start(false) }
}

/// Where the writer thread is in a batch (`WriterExecutor.observeBatches`).
public enum WriterBatchPoint: Sendable, Equatable {
    /// It is about to run the batch's task pieces.
    case started
    /// The task pieces ran; it is about to begin a transaction, which may wait for the database
    /// lock (another process's write): whatever the pieces left for others should go now.
    case committing
    /// The batch is done; `idle` when nothing else waits (the thread is about to sleep).
    case ended(idle: Bool)
}

extension OrderStore {
    /// A store without a queue of reads (a test's wrapper) reads at once.
    public func urgentRead<T: Sendable>(_ body: @escaping @Sendable (any StoreReader) throws -> T) async throws -> T {
        try await read(body)
    }

    /// `appendEvents` as the closure's last step.
    ///
    /// `@inlinable` (with `writeNow(appendingEvents:)`): compiled in the caller for its `T`, not
    /// through this module's generic code, which asked the runtime for the tuple's type on every
    /// write (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    @inlinable
    public func write<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        try await write(Self.appendingEvents(body))
    }

    /// Writes to some orders need no turns of their own (one writer, or a test's wrapper).
    public func write<T: Sendable>(
        changing orders: [OrderID], in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        try await write(appendingEvents: body)
    }

    /// `write(changing:in:appendingEvents:)` of the one order `order`.
    public func write<T: Sendable>(
        changing order: OrderID, in company: CompanyID,
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) async throws -> (T, [StoredEvent]) {
        try await write(changing: [order], in: company, appendingEvents: body)
    }

    /// Never at once: every write goes through `write`.
    public func writeNow<T: Sendable>(_ body: @escaping @Sendable (any StoreWriter) throws -> T) throws -> T? { nil }

    /// `writeNow` with the events `body` returns appended as its last step, as
    /// `write(appendingEvents:)` does on a store with one writer (the only kind `writeNow` runs on).
    @inlinable
    public func writeNow<T: Sendable>(
        appendingEvents body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) throws -> (T, [StoredEvent])? {
        try writeNow(Self.appendingEvents(body))
    }

    /// `body` with the events it returns appended as its last step (`StoreWriter.appendEvents`),
    /// for `write(appendingEvents:)` and `writeNow(appendingEvents:)`.
    @usableFromInline
    static func appendingEvents<T: Sendable>(
        _ body: @escaping @Sendable (any StoreWriter) throws -> (T, [OrderEvent])
    ) -> @Sendable (any StoreWriter) throws -> (T, [StoredEvent]) {
        { tx in
            let (value, events) = try body(tx)
            return (value, events.isEmpty ? [] : try tx.appendEvents(events))
        }
    }

    /// Nothing to report (stores without background work of their own).
    public var health: StoreHealth { StoreHealth() }

    /// Not supported: events go through the relay.
    public func observeCommits(_ observer: @escaping @Sendable ([StoredEvent]) -> Void) -> Bool { false }

    /// Nothing to remove.
    public func stopObservingCommits() {}

    /// None: callers run on Swift's global pool.
    public var writerExecutor: (any WriterExecutor)? { nil }
}

/// A lock held by at most one process of a cluster at a time (see `OrderStore.lease(_:)`).
///
/// A holder cannot know it still holds a lease across a network, only that it did at its last
/// heartbeat: `isHeld` turns false as soon as a heartbeat misses, before the server could give
/// the lease to another node when the holder is cut off or frozen. When the server itself ends the
/// holder's session (`pg_terminate_backend`, a restart, a promoted standby) the lock is free at once,
/// and another node may take it up to a heartbeat (about 1 s) before the holder notices. Work done
/// under a lease must therefore be harmless if repeated or overlapped (the relay republishes and
/// subscribers drop event ids they already have; two pruners are serialized by their row locks).
public protocol Lease: Sendable {
    /// Waits until this process holds the lease. Returns `false` only when the task is cancelled.
    func acquire() async -> Bool
    /// Whether the lease is (still) held. Turns false on a missed heartbeat or lost connection;
    /// the holder stops its work and calls `acquire` again.
    var isHeld: Bool { get }
    /// Gives the lease up (nothing happens if it is not held).
    func release() async
}

/// What a read transaction can see.
public protocol StoreReader {
    // MARK: Companies and users
    func company(_ id: CompanyID) throws -> Company?
    func user(_ id: UserID) throws -> User?
    /// The user with this email (case-insensitive), with the stored password hash.
    func credentials(email: String) throws -> (user: User, passwordHash: String)?
    /// The user owning an unexpired, unrevoked API token whose SHA-256 is `tokenHash`, the token's
    /// session epoch, and when it was last used (`touchToken`; its login for a token an older
    /// release made, which keeps no last use).
    func user(tokenHash: [UInt8], now: Date) throws -> (user: User, epoch: SessionEpoch, lastUsedAt: Date)?
    /// The drivers of a company, by id.
    func drivers(in company: CompanyID) throws -> [User]

    // MARK: Orders
    /// One page of a company's order summaries matching `query`, newest first (`id` descending).
    ///
    /// Each page is one keyset range scan on an index led by `company_id` (see `OrderQuery`); a
    /// `text` filter walks that range until the page is full, so a rare text may scan the whole
    /// company's history: bounded by its size, never worse.
    func orderPage(in company: CompanyID, _ query: OrderQuery) throws -> OrderPage
    /// How many of a company's orders have each status (only `driver`'s if given); statuses with
    /// no order are absent.
    func orderCounts(in company: CompanyID, driver: UserID?) throws -> [OrderStatus: Int]
    /// The full order (stages by position, documents by id) if it belongs to `company`.
    func order(_ id: OrderID, in company: CompanyID) throws -> Order?

    // MARK: Outbox
    /// Committed events of `group` with an id greater than `after`, ascending, at most `limit`.
    func events(of group: Group, after: EventID, limit: Int) throws -> [StoredEvent]
    /// Committed events of any group with an id greater than `after`, ascending, at most `limit` (the relay's read).
    func events(after: EventID, limit: Int) throws -> [StoredEvent]
    /// The newest committed event id (`.zero` when there is none).
    func newestEventID() throws -> EventID
    /// Events with an id up to and including this one were pruned: resuming from before it needs a reset.
    func prunedThrough() throws -> EventID
    /// The relay's cursor: every event up to it was handed to the broker.
    func relayedThrough() throws -> EventID
    /// When the oldest event not yet relayed was committed; `nil` if none is waiting.
    func oldestUnrelayedEventTime() throws -> Date?
    /// The stored event with exactly this id, if it exists (not pruned): checks a resume cursor.
    func event(_ id: EventID) throws -> StoredEvent?

    // MARK: Sessions across nodes
    /// Logouts recorded at or after `since`, or with an id above `afterID` (`nil`: none), oldest
    /// first, and the newest id recorded so far: every node closes those users' sockets and forgets
    /// their cached tokens (pollers overlap their windows and ignore repeats). `at` is the clock of
    /// the node that made the logout; the id is the store's, so a poller that asks for the ids above
    /// the newest it has seen also hears of a logout stamped by a node whose clock runs behind its
    /// own by more than the window.
    func logoutPoll(since: Date, afterID: Int64?) throws -> LogoutPoll
    /// The session epoch of each of `users` that exists, now: a user's epoch is the one their
    /// latest logout started, so it tells which of their credentials every logout so far revoked,
    /// pruned logout records included. Read by a node that lost track of logouts
    /// (`Hub.sweepSessions`). Users that do not exist are absent; so are repeats.
    func sessionEpochs(of users: [UserID]) throws -> [UserID: SessionEpoch]
}

extension StoreReader {
    /// Logouts recorded at or after `since`, oldest first.
    public func logouts(since: Date) throws -> [Logout] { try logoutPoll(since: since, afterID: nil).logouts }
}

/// What one poll of the logouts read (`StoreReader.logoutPoll`).
public struct LogoutPoll: Sendable, Equatable {
    public var logouts: [Logout]
    /// The highest logout id in the store when the poll read (0 for none), read before the rows.
    public var newestID: Int64
    public init(logouts: [Logout], newestID: Int64) {
        self.logouts = logouts
        self.newestID = newestID
    }
}

/// What a write transaction can do, on top of reading (`IdempotencyRecords`: `Idempotency-Key` records).
public protocol StoreWriter: StoreReader, IdempotencyRecords {
    // MARK: Companies and users
    func insertCompany(name: String) throws -> Company
    /// - Throws: `StoreError.conflict` when the email is taken.
    func insertUser(companyID: CompanyID?, role: Role, email: String, name: String, passwordHash: String) throws -> User
    /// Stores an API token by its SHA-256 only; `expiresAt` `nil` = does not expire. Keeps the user's
    /// `maxTokensPerUser` tokens used last (`touchToken`; a new one counts as used at its creation)
    /// and deletes the rest (their devices must log in again): successful logins are not throttled,
    /// and each added a row kept until its expiry, so one account could grow the table by millions
    /// of rows (found by a review). By last use, not by age: a script running `waybill driver` a
    /// hundred times, each run a login, evicted the driver's phone, in use all along (a review, 2026-12-07).
    func insertToken(hash: [UInt8], for user: UserID, createdAt: Date, expiresAt: Date?) throws
    /// Notes that the token whose SHA-256 is `hash` was used at `at` (its last use moves forward
    /// only: a node whose clock is behind never takes it back).
    func touchToken(hash: [UInt8], at: Date) throws
    /// Revokes every token of `user` (they stop authenticating at once), deletes their unredeemed
    /// WebSocket tickets (a ticket taken before a logout must not open a socket after it), starts
    /// the user's next session epoch (tokens made from now on carry it) and records a `Logout`
    /// stamped with the store's clock and that epoch, so every node hears of it.
    ///
    /// Every token and ticket this revokes has an epoch below the logout's: it was committed before
    /// this transaction's update, so it read the user's epoch before this one raised it. A token
    /// inserted while this runs is ordered by the user's row (`insertToken` reads the epoch under
    /// a lock this update conflicts with): it gets the new epoch, or is committed first and revoked.
    /// - Returns: that `Logout`, as `logouts(since:)` will read it (the node that made it has acted).
    /// - Throws: `StoreError.notFound` if the user does not exist.
    @discardableResult func revokeTokens(of user: UserID) throws -> Logout
    /// The user of an unexpired, unrevoked token whose SHA-256 is `tokenHash`, read so that a
    /// concurrent `revokeTokens` of that user is ordered after this transaction (PostgreSQL: the
    /// token's row is locked `FOR SHARE`; SQLite: write transactions run one at a time). A ticket
    /// inserted in the same transaction is then either refused here or deleted by that logout.
    /// Also returns the token's session epoch, which the ticket carries.
    func validTokenUser(tokenHash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)?
    /// Stores a WebSocket ticket by its SHA-256 only, with the epoch of the token it was issued for.
    func insertTicket(hash: [UInt8], for user: UserID, epoch: SessionEpoch, expiresAt: Date) throws
    /// Deletes the ticket and returns its user and epoch if it existed and had not expired: single use.
    /// Also deletes unredeemed tickets that expired more than `TicketSweep.grace` (5 min) before `now`.
    func consumeTicket(hash: [UInt8], now: Date) throws -> (user: UserID, epoch: SessionEpoch)?

    // MARK: Login throttle (shared by every node)
    /// Records a login attempt for `key` at `at` unless `limit` attempts are already recorded
    /// inside `(at - window, at + window]`; returns whether it was recorded. Concurrent calls for
    /// one key serialize (two nodes never both take the last slot). Attempts more than a window
    /// after `at` are not counted: recorded before the clock was set back, they kept the key locked
    /// out for as long as the step (found by a review, 2026-12-05). Nothing is deleted here (the
    /// pruner does, after the session retention): deleting by this node's clock let a node running
    /// a window behind, or ahead, clear the key's count for the others at every login it took.
    func reserveLoginAttempt(key: String, at: Date, window: TimeInterval, limit: Int) throws -> Bool
    /// Takes back the attempt recorded for `key` at `at` (the login succeeded: it was no failure).
    func releaseLoginAttempt(key: String, at: Date) throws
    /// Deletes up to `limit` rows recorded before `cutoff`: login attempts of every key first, then
    /// logouts, then WebSocket tickets that expired unredeemed, then API tokens that expired;
    /// returns how many went (fewer than `limit`: nothing older is left). In chunks, like events:
    /// after a long password-guessing run one delete of them all held the writer.
    func pruneSessionRecords(before cutoff: Date, limit: Int) throws -> Int

    // MARK: Orders
    /// The next per-company sequence number for orders of that year and month (1, 2, …).
    func nextOrderSequence(company: CompanyID, year: Int, month: Int) throws -> Int
    /// Inserts a new order (its `id` and stage/document ids must be `nil`); returns it with ids.
    /// - Throws: `StoreError.conflict` when the number is taken in that company.
    func insertOrder(_ order: Order) throws -> Order
    /// Saves every field of an existing order. Stages are synced: listed ones with an id are
    /// updated, ones without are inserted, unlisted ones deleted; new documents (id `nil`) are inserted.
    /// Returns the order as stored, with all ids.
    /// - Throws: `StoreError.notFound` if it does not exist.
    func updateOrder(_ order: Order) throws -> Order
    /// Deletes the order with its stages and documents.
    func deleteOrder(_ id: OrderID, in company: CompanyID) throws
    /// Records that `driver`'s device showed `version` of order `id` (SPEC §2, "Receipts"), at `at`.
    ///
    /// Applies only when the order belongs to `company`, is assigned to `driver`, `version` is at
    /// most its current version and newer than the receipt it holds from that driver (a receipt
    /// from a previous driver never counts). One conditional `UPDATE`: no read-modify-write race.
    /// Does not touch `version` or `updatedAt`.
    /// - Returns: the order's summary with its new `seen` if the receipt changed, else `nil`.
    func recordSeen(_ id: OrderID, version: Int, by driver: UserID, in company: CompanyID, at: Date) throws -> OrderSummary?

    // MARK: Outbox
    /// Appends events in this transaction, giving each the next event id.
    ///
    /// Ids are strictly increasing in commit order on every backend (see docs/DESIGN.md,
    /// "Event ids"): a writer takes its ids as the last step before commit.
    func appendEvents(_ events: [OrderEvent]) throws -> [StoredEvent]
    /// Moves the relay cursor forward (never back).
    func markRelayed(through: EventID) throws
    /// Deletes relayed events committed before `cutoff` (never the newest), at most the `limit` oldest, and returns
    /// how many went (fewer than `limit`: nothing more is due). Resumes from before the pruned range
    /// get a reset afterwards. Callers prune in chunks, one short transaction each: a day of events
    /// in one transaction outlasts PostgreSQL's statement timeout and holds SQLite's writer.
    func pruneEvents(committedBefore cutoff: Date, limit: Int) throws -> Int
}

/// API tokens one user keeps (`StoreWriter.insertToken`): one per device that logged in, newest first.
public let maxTokensPerUser = 100

/// The last event id one `pruneEvents(committedBefore:limit:)` call may delete: at most `limit` ids
/// past `pruned` (ids are dense above it, so at most `limit` events), never past `relayed`, and
/// never the `newest` event. For the store modules, which scan only up to one past it for the first
/// event to keep (there is no index by time: an unbounded scan would walk the whole backlog once per chunk).
///
/// The newest event stays however old: its cursor is what every `connected` frame hands out, and a
/// resume from a cursor whose event is gone gets `reset`. Once every event had aged out, each
/// reconnect of every client was a `reset` and a refetch of everything (found by a review).
package func pruneChunkEnd(pruned: Int64, relayed: Int64, newest: Int64, limit: Int) -> Int64 {
    let (end, overflow) = pruned.addingReportingOverflow(Int64(clamping: limit))
    return min(relayed, newest - 1, overflow ? .max : end)
}

/// The last event id a prune may delete, given the chunk's end and the first event at or after
/// `pruned + 1` (searched through `upper + 1`) that is younger than the cutoff.
///
/// An event goes only when the one after it is old too. A driver's cursor is where its last pong
/// said the node's newest delivered event was, so after a quiet spell (no commit for longer than
/// the retention) it names the event before the first new one: pruned at once, a resume within
/// seconds of that new commit would get a needless `reset`. Kept, a cursor is good for the
/// retention counted from the first event the driver has not seen.
package func pruneBound(upper: Int64, firstKept: Int64?) -> Int64 {
    guard let firstKept else { return upper }
    return min(upper, firstKept - 2)
}

/// WebSocket tickets nobody redeemed are swept when another ticket is presented, once they
/// expired this long before the presenting node's clock. A ticket is stamped by the node that
/// issued it and redeemed on any node: swept at the presenting node's `now`, a node whose clock
/// ran ahead by more than a ticket's life deleted every live ticket of the cluster at each
/// handshake, and clients it logged out had done nothing wrong (found by a review, 2026-12-05).
public enum TicketSweep {
    public static let grace: TimeInterval = 300
}

extension StoreWriter {
    /// Every event due at once (tests, small stores).
    public func pruneEvents(committedBefore cutoff: Date) throws -> Int {
        try pruneEvents(committedBefore: cutoff, limit: .max)
    }
}

/// A user logged out (every token revoked) at `at`; `epoch` is the session epoch it started.
/// The credentials it revoked are the user's with a smaller epoch.
public struct Logout: Sendable, Hashable {
    public var userID: UserID
    /// When it was made, by the clock of the node that made it.
    public var at: Date
    public var epoch: SessionEpoch
    /// The store's id of the record: increasing as logouts are recorded (on PostgreSQL in the order
    /// they were inserted, which their commits need not follow).
    public var id: Int64
    public init(userID: UserID, at: Date, epoch: SessionEpoch, id: Int64 = 0) {
        self.userID = userID
        self.at = at
        self.epoch = epoch
        self.id = id
    }

    /// Whether this logout revoked a credential of its user with epoch `epoch`.
    public func revokes(_ epoch: SessionEpoch) -> Bool { epoch < self.epoch }
}

/// How many times a user had logged out when one of their tokens was made (a ticket carries its
/// token's). A logout revokes every token made before it, and only those: they carry a smaller
/// epoch than the one the logout records. So a node told of a logout, maybe a second after it,
/// closes the sockets those credentials opened and not the socket of a login made since
/// (docs/DESIGN.md, "Sessions across nodes"). Counted per user by the store.
public struct SessionEpoch: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: Int64
    public init(rawValue: Int64) { self.rawValue = rawValue }
    public init(_ rawValue: Int64) { self.rawValue = rawValue }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "\(rawValue)" }
    /// What a logout recorded by a Waybill older than epochs reads as: it revokes every credential.
    public static let revokesAll = SessionEpoch(.max)
}

/// Storage failures in the store's own words; backends translate their C codes into these.
public enum StoreError: Error, Equatable, Sendable, CustomStringConvertible {
    case notFound
    /// A uniqueness rule was broken (e.g. email or order number taken).
    case conflict(String)
    /// The store cannot be reached or is closed.
    case unavailable(String)
    /// Anything else the backend reported: code and message, never bound values.
    case failure(code: Int32, message: String)

    public var description: String {
        switch self {
        case .notFound: "not found"
        case .conflict(let what): "conflict: \(what)"
        case .unavailable(let why): "store unavailable: \(why)"
        case .failure(let code, let message): "store failure \(code): \(message)"
        }
    }
}
