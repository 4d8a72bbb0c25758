extension PostgresSchema {
    /// `Idempotency-Key` records (SPEC §2), as on SQLite: `status` is NULL while the request is in
    /// progress; `updated_at` (claim, takeover or response) is what pruning goes by.
    static let idempotencyKeys = """
        CREATE TABLE idempotency_keys (
            user_id BIGINT NOT NULL,
            key TEXT NOT NULL,
            method TEXT NOT NULL,
            path TEXT NOT NULL,
            fingerprint BYTEA NOT NULL,
            token TEXT NOT NULL,
            status INTEGER,
            headers TEXT,
            body BYTEA,
            updated_at BIGINT NOT NULL,
            PRIMARY KEY (user_id, key)
        );
        CREATE INDEX idempotency_keys_by_time ON idempotency_keys (updated_at);
        """
}
