extension SQLiteSchema {
    /// `Idempotency-Key` records (SPEC §2): one row per user and key. `status` is NULL while the
    /// request is in progress; `updated_at` (claim, takeover or response) is what pruning goes by.
    /// A rowid table, not WITHOUT ROWID: rows carry whole response bodies.
    static let idempotencyKeys = """
        CREATE TABLE idempotency_keys (
            user_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            method TEXT NOT NULL,
            path TEXT NOT NULL,
            fingerprint BLOB NOT NULL,
            token TEXT NOT NULL,
            status INTEGER,
            headers TEXT,
            body BLOB,
            updated_at INTEGER NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        CREATE INDEX idempotency_keys_by_time ON idempotency_keys (updated_at);
        """
}
