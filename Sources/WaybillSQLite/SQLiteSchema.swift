/// The SQL of each migration. Times are INTEGER milliseconds since the epoch (UTC).
enum SQLiteSchema {
    static let initial = """
        CREATE TABLE companies (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            name TEXT NOT NULL
        );

        -- email_key is the email lowercased by Swift: case-insensitive uniqueness for all of
        -- Unicode, which SQLite's NOCASE (ASCII only) would not give.
        CREATE TABLE users (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            company_id INTEGER REFERENCES companies(id),
            role TEXT NOT NULL CHECK (role IN ('dispatcher', 'driver')),
            email TEXT NOT NULL,
            email_key TEXT NOT NULL UNIQUE,
            name TEXT NOT NULL,
            password_hash TEXT NOT NULL
        );
        CREATE INDEX users_by_company ON users (company_id, role);

        -- Only SHA-256 hashes of tokens and tickets are stored: a leaked file grants no access.
        CREATE TABLE api_tokens (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            token_hash BLOB NOT NULL UNIQUE,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            created_at INTEGER NOT NULL,
            expires_at INTEGER,
            revoked INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX api_tokens_by_user ON api_tokens (user_id);

        CREATE TABLE ws_tickets (
            ticket_hash BLOB PRIMARY KEY NOT NULL,
            user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
            expires_at INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX ws_tickets_by_expiry ON ws_tickets (expires_at);

        CREATE TABLE order_sequences (
            company_id INTEGER NOT NULL REFERENCES companies(id),
            year INTEGER NOT NULL,
            month INTEGER NOT NULL,
            last INTEGER NOT NULL,
            PRIMARY KEY (company_id, year, month)
        ) WITHOUT ROWID;

        -- AUTOINCREMENT: ids appear in events and URLs, so a deleted order's id is never reused.
        CREATE TABLE orders (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            company_id INTEGER NOT NULL REFERENCES companies(id),
            number TEXT NOT NULL,
            status TEXT NOT NULL,
            driver_id INTEGER REFERENCES users(id),
            title TEXT NOT NULL,
            notes TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            version INTEGER NOT NULL,
            UNIQUE (company_id, number)
        );
        CREATE INDEX orders_by_company ON orders (company_id, id);
        CREATE INDEX orders_by_driver ON orders (company_id, driver_id, id);

        CREATE TABLE stages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            order_id INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
            position INTEGER NOT NULL,
            kind TEXT NOT NULL,
            address TEXT NOT NULL,
            planned_at INTEGER,
            completed_at INTEGER
        );
        CREATE INDEX stages_by_order ON stages (order_id, position);

        CREATE TABLE documents (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            order_id INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
            name TEXT NOT NULL,
            kind TEXT NOT NULL,
            created_at INTEGER NOT NULL
        );
        CREATE INDEX documents_by_order ON documents (order_id, id);

        -- The outbox. event_id is assigned from event_counter, never by SQLite, and there is no
        -- foreign key to orders: an order_deleted event outlives its order. `groups` repeats the
        -- group names (space-separated) so a read needs no join to rebuild an event.
        CREATE TABLE events (
            event_id INTEGER PRIMARY KEY,
            company_id INTEGER NOT NULL,
            type TEXT NOT NULL,
            order_id INTEGER NOT NULL,
            number TEXT NOT NULL,
            old_status TEXT,
            new_status TEXT NOT NULL,
            driver_id INTEGER,
            old_driver_id INTEGER,
            groups TEXT NOT NULL,
            changed_at INTEGER NOT NULL,
            committed_at INTEGER NOT NULL
        );
        -- Keyed by group first so "events of group G after N" is one index range scan.
        CREATE TABLE event_groups (
            event_id INTEGER NOT NULL,
            group_name TEXT NOT NULL,
            PRIMARY KEY (group_name, event_id)
        ) WITHOUT ROWID;
        CREATE INDEX event_groups_by_event ON event_groups (event_id);

        CREATE TABLE event_counter (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            last_id INTEGER NOT NULL
        );
        INSERT INTO event_counter (id, last_id) VALUES (1, 0);

        CREATE TABLE outbox_state (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            relayed_through INTEGER NOT NULL,
            pruned_through INTEGER NOT NULL
        );
        INSERT INTO outbox_state (id, relayed_through, pruned_through) VALUES (1, 0, 0);
        """

    /// What every node of a cluster must agree on about sessions: logouts (so each node closes the
    /// user's sockets and drops cached tokens) and login attempts (one throttle, not one per node).
    static let sharedSessions = """
        CREATE TABLE logouts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            user_id INTEGER NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX logouts_by_time ON logouts (at);

        CREATE TABLE login_attempts (
            key TEXT NOT NULL,
            at INTEGER NOT NULL
        );
        CREATE INDEX login_attempts_by_key ON login_attempts (key, at);
        CREATE INDEX login_attempts_by_time ON login_attempts (at);
        """

    /// Paged, filtered order lists (`OrderQuery`): (company_id, id) and (company_id, driver_id, id)
    /// exist since 0001; a status filter (`active=true`, `status=`) gets its own keyset range here,
    /// so a page of one status costs the same however much history the other statuses hold.
    static let orderListIndexes = """
        CREATE INDEX orders_by_status ON orders (company_id, status, id);
        """

    /// Read receipts (SPEC §2): on the order row, with the driver they came from (a receipt counts
    /// only while that driver is assigned; see `OrderReceipt`), and the version an `order_seen`
    /// event reports, so a replay rebuilds the same frame.
    static let receipts = """
        ALTER TABLE orders ADD COLUMN seen_driver_id INTEGER;
        ALTER TABLE orders ADD COLUMN seen_version INTEGER;
        ALTER TABLE orders ADD COLUMN seen_at INTEGER;
        ALTER TABLE events ADD COLUMN seen_version INTEGER;
        """
}

extension SQLiteSchema {
    /// The outbox without its counter row and without the by-event index (measured: together about
    /// a tenth of a write's SQLite time at 1 000 writes/s; docs/BENCHMARKS.md, 2026-12-02 04:00).
    ///
    /// - `event_counter` was one more page written by every commit, and its
    ///   `UPDATE … RETURNING` built and freed a temporary b-tree per write. On SQLite one writer
    ///   holds the lock at a time, so the next id is readable inside the transaction instead:
    ///   `max(newest event, pruned_through) + 1` (`SQLiteOrderStore.Transaction.newestID`).
    ///   Pruning deletes a prefix of the ids and records its end in `pruned_through`, so the
    ///   counter's value is recovered even when every event has been pruned. The first statement
    ///   makes that hold for a file whose events are all gone (the counter is the only record of
    ///   the last id then).
    /// - `event_groups_by_event` served only pruning; pruning now deletes by the primary key
    ///   (group, id range) for each group the pruned events name.
    static let outboxWithoutCounter = """
        UPDATE outbox_state
        SET pruned_through = max(pruned_through, (SELECT last_id FROM event_counter WHERE id = 1))
        WHERE id = 1 AND NOT EXISTS (SELECT 1 FROM events WHERE event_id > outbox_state.pruned_through);
        DROP TABLE event_counter;
        DROP INDEX event_groups_by_event;
        """
}

extension SQLiteSchema {
    /// Session epochs (`SessionEpoch`): each user counts their logouts, each token and ticket keeps
    /// the count from when its token was made, and each logout records the count it started. A node
    /// told of a logout then closes only the sockets of credentials made before it.
    ///
    /// Rows from before this step read 0 (every existing token predates the first logout that
    /// follows). A logout row written without an epoch (a node still running an older Waybill)
    /// reads as `SessionEpoch.revokesAll`: it closes every socket of its user, as before.
    static let sessionEpochs = """
        ALTER TABLE users ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE api_tokens ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE ws_tickets ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE logouts ADD COLUMN session_epoch INTEGER NOT NULL DEFAULT 9223372036854775807;
        """
}

extension SQLiteSchema {
    /// From here a fleet's events are read from its company's index rows, and new events get no
    /// fleet row (`EventGroupRows`). No table changes: the step is recorded so that an older
    /// Waybill, which reads a fleet's own rows and would miss every event written from here on
    /// (its replays of the fleet map with gaps, and no reset), refuses the file as one a newer
    /// release upgraded. The fleet rows written before stay until pruning removes them.
    static let fleetReadsCompanyRows = "SELECT 1;"
    /// Each event's secret salt, hashed into its cursor's check (`StoredEvent.salt`); 0 for the
    /// events already stored, whose cursors (held by clients) stay as they were.
    static let eventCursorSalt = """
        ALTER TABLE events ADD COLUMN cursor_salt INTEGER NOT NULL DEFAULT 0;
        """

    /// When each API token was last used (`touchToken`, at most every few minutes): a dispatcher's
    /// token unused for `--token-idle-hours` stops working (docs/DESIGN.md, "Decisions where the
    /// SPEC is silent"). Tokens that exist now count as used at this migration (refused at once,
    /// every dispatcher would be logged out by the upgrade; counted as used at each one's next use,
    /// a copied token would get a fresh limit from whoever used it next: a review). A token an
    /// older release inserts later has none and counts as used at its login (`coalesce`).
    static let tokenLastUse = """
        ALTER TABLE api_tokens ADD COLUMN last_used_at INTEGER;
        UPDATE api_tokens SET last_used_at = CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
        """

    /// API tokens that expired are pruned with the other session records (`pruneSessionRecords`);
    /// every login adds one, so without this the table grew by a row per login for good. A token
    /// with no expiry stays (revoked or not: nothing records when it was revoked).
    static let tokenExpiryIndex = """
        CREATE INDEX api_tokens_by_expiry ON api_tokens (expires_at);
        """

    /// A driver's pages by status: every driver query is narrowed to that driver, and without this
    /// each status branch of `active=true` (and the recent half, and the driver's counts) walked
    /// `orders_by_driver` over the driver's whole history, checking the status row by row: 5–25 ms
    /// for a 1 000-order history on every driver's refetch (found by a review, 2026-12-04). It
    /// changes only when an order's status or driver does, not on the other writes.
    static let driverStatusIndex = """
        CREATE INDEX orders_by_driver_status ON orders (company_id, driver_id, status, id);
        """

    /// A driver's recently finished orders (the driver list's second half: `status=completed&
    /// status=cancelled&updated_after=<a day ago>`) as a range of their update times, not a walk of
    /// the driver's whole finished history checking each row's `updated_at` (found by an audit,
    /// 2026-12-06: every refetch of every driver read all their finished orders, a table row each).
    /// Partial: only finished orders have entries, so a write to an active order, whose
    /// `updated_at` changes at every write, never touches it; an order enters it once, when it
    /// finishes (and moves in it if it is changed afterwards). A query uses it only when its SQL
    /// itself says `status IN ('cancelled', 'completed')` (`OrderQuery.finishedOnlyClause`): SQLite
    /// does not read a bound parameter's value to prove a partial index applies.
    static let finishedByDriverIndex = """
        CREATE INDEX orders_finished_by_driver ON orders (company_id, driver_id, status, updated_at)
        WHERE status IN ('cancelled', 'completed');
        """

    /// The orders of each status per company (`driver_id` 0) and per driver, kept by triggers in
    /// the transaction of every insert, delete and change of an order's status or driver: the
    /// panel asks for its company's counts after every event that may move one (a create, an
    /// assignment, a status change, a delete), and `count(*) … GROUP BY status` walked the
    /// company's whole history each time: 11 ms at 100 000 orders (found by an audit, 2026-12-06).
    /// Now a read is one short range of this table, whatever the history.
    ///
    /// Triggers rather than the store's code: every statement that inserts, deletes or updates
    /// rows of `orders` keeps the counts, whatever code sends it (not `REPLACE INTO`, which deletes
    /// without the delete trigger here, nor a restore of the table's rows alone), and `updateOrder`
    /// sets only the columns that changed, so the update trigger runs only when a status, a driver
    /// or a company did, never on the other writes. Rows that fall to 0 stay. (The update trigger
    /// repeats the others' statements: a migration's SQL stays one literal, so that no later edit
    /// of a shared piece can change a migration that has shipped.)
    static let orderCounts = """
        CREATE TABLE order_counts (
            company_id INTEGER NOT NULL,
            driver_id INTEGER NOT NULL,
            status TEXT NOT NULL,
            n INTEGER NOT NULL,
            PRIMARY KEY (company_id, driver_id, status)
        ) WITHOUT ROWID;
        INSERT INTO order_counts (company_id, driver_id, status, n)
            SELECT company_id, 0, status, count(*) FROM orders GROUP BY company_id, status;
        INSERT INTO order_counts (company_id, driver_id, status, n)
            SELECT company_id, driver_id, status, count(*) FROM orders WHERE driver_id IS NOT NULL
            GROUP BY company_id, driver_id, status;
        CREATE TRIGGER order_counts_insert AFTER INSERT ON orders BEGIN
            INSERT INTO order_counts (company_id, driver_id, status, n) VALUES (new.company_id, 0, new.status, 1)
                ON CONFLICT (company_id, driver_id, status) DO UPDATE SET n = n + 1;
            INSERT INTO order_counts (company_id, driver_id, status, n)
                SELECT new.company_id, new.driver_id, new.status, 1 WHERE new.driver_id IS NOT NULL
                ON CONFLICT (company_id, driver_id, status) DO UPDATE SET n = n + 1;
        END;
        CREATE TRIGGER order_counts_delete AFTER DELETE ON orders BEGIN
            UPDATE order_counts SET n = n - 1
                WHERE company_id = old.company_id AND driver_id = 0 AND status = old.status;
            UPDATE order_counts SET n = n - 1
                WHERE company_id = old.company_id AND driver_id = old.driver_id AND status = old.status;
        END;
        CREATE TRIGGER order_counts_update AFTER UPDATE OF status, driver_id, company_id ON orders
            WHEN old.status IS NOT new.status OR old.driver_id IS NOT new.driver_id
                OR old.company_id IS NOT new.company_id
        BEGIN
            UPDATE order_counts SET n = n - 1
                WHERE company_id = old.company_id AND driver_id = 0 AND status = old.status;
            UPDATE order_counts SET n = n - 1
                WHERE company_id = old.company_id AND driver_id = old.driver_id AND status = old.status;
            INSERT INTO order_counts (company_id, driver_id, status, n) VALUES (new.company_id, 0, new.status, 1)
                ON CONFLICT (company_id, driver_id, status) DO UPDATE SET n = n + 1;
            INSERT INTO order_counts (company_id, driver_id, status, n)
                SELECT new.company_id, new.driver_id, new.status, 1 WHERE new.driver_id IS NOT NULL
                ON CONFLICT (company_id, driver_id, status) DO UPDATE SET n = n + 1;
        END;
        """
}
