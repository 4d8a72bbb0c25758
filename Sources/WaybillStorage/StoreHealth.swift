/// What a store knows is wrong with itself even while it answers queries (`OrderStore.health`).
///
/// A store can serve every read and write and still be heading for trouble: SQLite's WAL
/// checkpoints failing mean the log grows without bound. `/readyz` fails while `problems` is not
/// empty, `/metrics` exports the counters, and the server logs each new problem at error.
public struct StoreHealth: Sendable, Equatable {
    /// Short, fixed descriptions (no paths, no values), e.g. `"wal_checkpoint_failing"`.
    public var problems: [String]
    /// WAL checkpoints that failed since the store opened (0 for stores without a WAL checkpointer).
    public var checkpointFailures: Int
    /// The write-ahead log's size in pages after the last commit (SQLite; `nil` for other stores,
    /// or before the first commit). A log that keeps growing though checkpoints succeed means a
    /// reader holds it (a backup tool, an open `sqlite3` shell): nothing else reported that.
    public var walPages: Int?
    /// Short, fixed descriptions of what is wrong but leaves the store serving as it should, e.g.
    /// `"postgres_urgent_reader_unconnected"`: logged at warning while it lasts; `/readyz` still
    /// passes (a node that answers every call must not leave the load balancer for it).
    public var warnings: [String]

    public init(problems: [String] = [], checkpointFailures: Int = 0, walPages: Int? = nil, warnings: [String] = []) {
        self.problems = problems
        self.checkpointFailures = checkpointFailures
        self.walPages = walPages
        self.warnings = warnings
    }

    public var isHealthy: Bool { problems.isEmpty }
}
