/// A `read` or `write` closure bound to its caller's continuation, run on a worker thread.
struct PostgresJob: Sendable {
    let run: @Sendable (PostgresSession) -> Void
}
