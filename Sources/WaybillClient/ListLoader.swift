/// When the order list is fetched: at start, when the list revision changes, and every `pollInterval`.
///
/// Any fetch restarts the polling countdown, so polling only costs requests when nothing else refreshed the
/// list. A revision change during a fetch queues exactly one more fetch (the running one may have read the
/// list before the change). The `ETag` of the last good response goes out as `If-None-Match`.
struct ListLoader: Sendable {
    enum Action: Hashable, Sendable {
        /// Fetch the list now and restart the polling countdown.
        case fetch(ifNoneMatch: String?)
        /// Nothing to do now.
        case none
    }

    let pollInterval: Duration
    private(set) var revision = 0
    private(set) var etag: String?
    private var isFetching = false
    private var needsAnotherFetch = false

    init(pollInterval: Duration) { self.pollInterval = pollInterval }

    /// The session stopped: forget the fetch in flight (its result is dropped), keep revision and tag.
    mutating func stopped() {
        isFetching = false
        needsAnotherFetch = false
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
        /// No usable answer: keep what we have; the next poll or revision change tries again.
        case failed
    }

    /// The fetch finished; fetches again if the revision changed meanwhile.
    mutating func fetchFinished(_ outcome: Outcome) -> Action {
        isFetching = false
        if case .modified(let newTag) = outcome { etag = newTag }
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
