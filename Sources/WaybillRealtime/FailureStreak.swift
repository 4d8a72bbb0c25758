/// Failures in a row of something retried often (a store read every poll, a cursor save every
/// round), for logging them without a line per attempt: the first failure, then every
/// `logEvery`-th, and the first success after them.
struct FailureStreak: Sendable {
    let logEvery: Int
    private(set) var inARow = 0

    init(logEvery: Int = 100) { self.logEvery = logEvery }

    /// Counts a failure; whether this one is to be logged.
    mutating func failed() -> Bool {
        inARow += 1
        return inARow % logEvery == 1
    }

    /// Ends the streak; how many failures it had, if any (to log the recovery once).
    mutating func succeeded() -> Int? {
        defer { inARow = 0 }
        return inARow > 0 ? inARow : nil
    }
}
