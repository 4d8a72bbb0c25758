/// The newest event id as of the writer connection's last commit, so that appending an event
/// needs no `SELECT max(event_id) …` (one of a write's ten statements, about 1.5 % of the
/// server's CPU at 1 000 writes/s; docs/BENCHMARKS.md, 2026-12-03).
///
/// Correct only while nothing else committed since: the cache is keyed by SQLite's data version
/// of the file (`SQLITE_FCNTL_DATA_VERSION`), which moves with every commit on this connection and,
/// from the next `BEGIN`, with every commit by another connection or process (`waybill seed`
/// beside a server). A version that differs, or a transaction that has already appended (its own
/// uncommitted ids are not in the cache), reads the table as before. A transaction that rolls back
/// leaves the cache as it was: its ids never existed, and the next write takes them again (no gap).
///
/// Owned by the writer connection and used only where that connection is (the writer thread, or
/// the service thread inline, never both at once).
struct NewestEventCache {
    /// "At data version `version`, the newest id ever given is `id`."
    private var known: (version: UInt32, id: Int64)?
    /// Whether `known` held when the open transaction began.
    private var validAtBegin = false
    /// Whether the open transaction appended events (then it reads the table).
    private var appendedInTransaction = false
    /// An append failed part-way in the open transaction: rows it wrote may commit unseen.
    private var untrusted = false
    /// Times the newest id was read from the table (tests and benchmarks).
    private(set) var lookups = 0

    /// A write transaction began (after `BEGIN IMMEDIATE`); `version` is the file's data version now.
    mutating func began(version: UInt32?) {
        appendedInTransaction = false
        untrusted = false
        validAtBegin = version != nil && known?.version == version
    }

    /// The newest id, if known for the open transaction at `version`; nil: read the table.
    func newest(version: UInt32?) -> Int64? {
        guard validAtBegin, !appendedInTransaction, let known, version != nil, known.version == version else {
            return nil
        }
        return known.id
    }

    /// The table was read (the answer is not cached: the transaction may still roll back).
    mutating func lookedUp() { lookups += 1 }

    /// The open transaction is about to append events: later appends in it read the table.
    mutating func appending() { appendedInTransaction = true }

    /// An append threw after some of its rows may have been written (SQLite undoes only the
    /// failing statement, and a closure may catch the error and commit): nothing is known until
    /// the table is read again.
    mutating func forget() {
        known = nil
        untrusted = true
    }

    /// The open transaction committed; `version` is the data version after the commit, and
    /// `lastEvent` the id of the last event it committed (nil if none).
    mutating func committed(version: UInt32?, lastEvent: Int64?) {
        defer {
            validAtBegin = false
            appendedInTransaction = false
            untrusted = false
        }
        guard let version, !untrusted else {
            known = nil
            return
        }
        if let lastEvent {
            // Ids only grow, and the last one committed is the highest that exists.
            known = (version, lastEvent)
        } else if validAtBegin, let id = known?.id {
            // Nothing appended that stayed, and nobody else could commit while this held the lock.
            known = (version, id)
        } else {
            known = nil
        }
    }
}
