/// When the order list is fetched: at start, when the list revision changes, and every `pollInterval`.
///
/// Any fetch restarts the polling countdown, so polling only costs requests when nothing else refreshed the
/// list. A revision change during a fetch queues exactly one more fetch (the running one may have read the
/// list before the change). The `ETag` of the last good response goes out as `If-None-Match`.
///
/// A fetch the server answered with "wait" (429, a 5xx) is tried again after a backoff instead of at
/// the next poll: the fetch was for a change the session already knows of (an event), and waiting
/// out the 120 s poll left the driver looking at the old order while the socket stayed live.
struct ListLoader: Sendable {
    enum Action: Hashable, Sendable {
        /// Fetch the list now and restart the polling countdown.
        case fetch(ifNoneMatch: String?)
        /// Fetch it again after the backoff for this many failures in a row (0-based attempt),
        /// through the polling countdown.
        case retry(attempt: Int)
        /// Nothing to do now.
        case none
    }

    let pollInterval: Duration
    private(set) var revision = 0
    private(set) var etag: String?
    private var isFetching = false
    private var needsAnotherFetch = false
    /// Fetches in a row that the server answered with "wait".
    private(set) var unavailableInARow = 0

    init(pollInterval: Duration) { self.pollInterval = pollInterval }

    /// The session stopped: forget the fetch in flight (its result is dropped), keep revision and tag.
    mutating func stopped() {
        isFetching = false
        needsAnotherFetch = false
        unavailableInARow = 0
    }

    /// The session starts: fetch at once.
    mutating func start() -> Action { requestFetch() }

    /// Something says the list is stale: bump the revision and fetch.
    mutating func bumpRevision() -> Action {
        revision += 1
        return requestFetch()
    }

    /// The server's history is not the one the tag came from (`reset`): the next fetch asks without it.
    mutating func forgetTag() { etag = nil }

    /// The polling countdown reached zero.
    mutating func countdownElapsed() -> Action {
        // A fetch in flight will restart the countdown when it is done anyway.
        isFetching ? .none : requestFetch()
    }

    /// How a list fetch ended.
    enum Outcome: Hashable, Sendable {
        /// 200 with this `ETag` (or none).
        case modified(etag: String?)
        /// 304: the list and its tag stay.
        case notModified
        /// No usable answer: keep what we have; the next poll or revision change tries again
        /// (offline: the socket's reconnect refetches; a 4xx: asking again changes nothing).
        case failed
        /// The server answered and asked to wait (429, a 5xx): fetched again after a backoff.
        case unavailable
    }

    /// The fetch finished; fetches again if the revision changed meanwhile.
    mutating func fetchFinished(_ outcome: Outcome) -> Action {
        isFetching = false
        if case .modified(let newTag) = outcome { etag = newTag }
        if outcome == .unavailable {
            // A change asked for meanwhile goes with the retry, not at once to a server that said wait.
            needsAnotherFetch = false
            unavailableInARow += 1
            return .retry(attempt: unavailableInARow - 1)
        }
        if outcome != .failed { unavailableInARow = 0 }
        if needsAnotherFetch {
            needsAnotherFetch = false
            return requestFetch()
        }
        return .none
    }

    private mutating func requestFetch() -> Action {
        if isFetching {
            needsAnotherFetch = true
            return .none
        }
        isFetching = true
        return .fetch(ifNoneMatch: etag)
    }
}
