import Foundation
import Synchronization

/// Counters and gauges exported at `GET /metrics` in the Prometheus text format.
///
/// Labels are bounded sets chosen by the server (route pattern, status, group kind); never a user
/// id, a path with ids, or a secret.
public final class Metrics: Sendable {
    private struct State {
        var requests: [RequestKey: Int] = [:]
        var durationBuckets = [Int](repeating: 0, count: Metrics.bucketBounds.count)
        var durationCount = 0
        var durationSum = 0.0
        var requestsWithoutTask = 0
        var openSockets: [String: Int] = [:]  // group kind → count
        var eventsCommitted = 0
        var eventsRelayed = 0
        var framesSent = 0
        var slowConsumerCloses = 0
        var resumes = 0
        var resets = 0
        var relayFailures = 0
        var feedStoreReads = 0
        var historyRewinds = 0
        var storeReads = 0
        var storeWrites = 0
        var deliveredEventID: Int64 = 0
        var overflows: [Bound: Int] = [:]
        var storeCheckpointFailures = 0
        var storeWALPages: Int?
    }

    static let bucketBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
    private let state = Mutex(State())
    /// Counts kept elsewhere (e.g. by a broker the server was handed), read at scrape time.
    private let scrapeReaders = Mutex<[Bound: @Sendable () -> Int]>([:])
    /// This node's name (`ServerConfiguration.nodeID`), exported as `waybill_node_info{node="…"} 1`.
    private let nodeID: String?

    public init(nodeID: String? = nil) {
        // A label value is quoted text: keep it to characters that need no escaping.
        self.nodeID = nodeID.map(Self.labelValue)
    }

    /// Printable ASCII without quotes or backslashes, at most 64 characters.
    static func labelValue(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: text.unicodeScalars.filter { $0.isASCII && $0.value >= 0x20 && $0 != "\"" && $0 != "\\" }.prefix(64))
        return String(scalars)
    }

    /// An answer the network layer gave itself (a refused framing, a body too large or too slow, a
    /// stop): `waybill_http_requests_total{route="network",status=…}`, outside the duration
    /// histogram (no handler ran).
    public func recordNetworkAnswer(status: Int) {
        state.withLock { $0.requests[RequestKey(route: "network", status: status), default: 0] += 1 }
    }

    /// `withoutTask`: answered on the service thread without a Swift task (an order write on the
    /// idle SQLite writer, `APIResponder.respondNow`): also counted in
    /// `waybill_http_requests_without_task_total`.
    public func recordRequest(route: String, status: Int, duration: Duration, withoutTask: Bool = false) {
        let seconds = duration / .seconds(1)  // Prometheus counts seconds
        state.withLock { s in
            s.requests[RequestKey(route: route, status: status), default: 0] += 1
            if withoutTask { s.requestsWithoutTask += 1 }
            for (i, bound) in Self.bucketBounds.enumerated() where seconds <= bound { s.durationBuckets[i] += 1 }
            s.durationCount += 1
            s.durationSum += seconds
        }
    }

    public func socketOpened(kind: String) { state.withLock { $0.openSockets[kind, default: 0] += 1 } }
    public func socketClosed(kind: String) { state.withLock { $0.openSockets[kind, default: 0] -= 1 } }
    public func eventsCommitted(_ n: Int) { state.withLock { $0.eventsCommitted += n } }
    public func eventsRelayed(_ n: Int) { state.withLock { $0.eventsRelayed += n } }
    public func framesSent(_ n: Int) { state.withLock { $0.framesSent += n } }
    public func slowConsumerClosed() { state.withLock { $0.slowConsumerCloses += 1 } }
    public func resumed() { state.withLock { $0.resumes += 1 } }
    public func reset() { state.withLock { $0.resets += 1 } }
    public func relayFailed() { state.withLock { $0.relayFailures += 1 } }
    /// The hub feed read events from the store (a gap in what the broker gave, or polling while it is down).
    public func feedReadStore() { state.withLock { $0.feedStoreReads += 1 } }
    public func historyRewound() { state.withLock { $0.historyRewinds += 1 } }
    /// Requests answered without a task so far (`recordRequest(withoutTask:)`).
    public var requestsWithoutTask: Int { state.withLock { $0.requestsWithoutTask } }

    /// One store transaction ran (read or write), whoever asked: the load a reconnect storm puts on the store.
    public func storeTransaction(write: Bool) { state.withLock { write ? ($0.storeWrites += 1) : ($0.storeReads += 1) } }
    /// The newest event id this node's hub has handed to its sockets (compare nodes: a node far
    /// behind the others is not getting events).
    public func delivered(through id: Int64) { state.withLock { $0.deliveredEventID = id } }
    /// The last value given to `delivered(through:)`: readable from any thread, at any time
    /// (also after the server stopped, when nothing runs on its service thread any more).
    public var deliveredEventID: Int64 { state.withLock { $0.deliveredEventID } }

    /// A bound on memory or work was hit and its overflow behaviour ran (docs/HARDENING.md, item 3).
    public func overflowed(_ bound: Bound) { state.withLock { $0.overflows[bound, default: 0] += 1 } }
    /// Adds `read()` to the overflow count of `bound` at every scrape (for counts kept by a part the
    /// server does not build, such as the broker it is handed).
    public func readAtScrape(_ bound: Bound, _ read: @escaping @Sendable () -> Int) {
        scrapeReaders.withLock { $0[bound] = read }
    }
    /// Overflows of `bound` so far (tests, logs).
    public func overflows(of bound: Bound) -> Int {
        let reader = scrapeReaders.withLock { $0[bound] }
        return state.withLock { $0.overflows[bound] ?? 0 } + (reader?() ?? 0)
    }
    /// The store's failed WAL checkpoints since it opened (`StoreHealth.checkpointFailures`), set at scrape time.
    public func storeCheckpointFailures(_ total: Int) { state.withLock { $0.storeCheckpointFailures = total } }
    /// The store's write-ahead log in pages (`StoreHealth.walPages`), set at scrape time; `nil`: not exported.
    public func storeWALPages(_ pages: Int?) { state.withLock { $0.storeWALPages = pages } }

    /// The exposition text; `outboxLagSeconds` is measured by the caller at scrape time, `nil` when
    /// the store could not be read: then `waybill_store_up` is 0 and the lag `NaN`, never a
    /// reassuring 0 that would hide the outage.
    public func render(outboxLagSeconds: Double?) -> String {
        let s = state.withLock { $0 }
        var out = ""
        if let nodeID {
            out += "# HELP waybill_node_info This node's name.\n# TYPE waybill_node_info gauge\n"
            out += "waybill_node_info{node=\"\(nodeID)\"} 1\n"
        }
        out += "# HELP waybill_http_requests_total HTTP requests by route pattern and status (route \"network\": answered by the network layer itself).\n"
        out += "# TYPE waybill_http_requests_total counter\n"
        for (key, count) in s.requests.sorted(by: { $0.key.sortText < $1.key.sortText }) {
            out += "waybill_http_requests_total{route=\"\(key.route)\",status=\"\(key.status)\"} \(count)\n"
        }
        out += "# HELP waybill_http_request_duration_seconds Time from request to response.\n"
        out += "# TYPE waybill_http_request_duration_seconds histogram\n"
        for (i, bound) in Self.bucketBounds.enumerated() {
            out += "waybill_http_request_duration_seconds_bucket{le=\"\(bound)\"} \(s.durationBuckets[i])\n"
        }
        out += "waybill_http_request_duration_seconds_bucket{le=\"+Inf\"} \(s.durationCount)\n"
        out += "waybill_http_request_duration_seconds_sum \(s.durationSum)\n"
        out += "waybill_http_request_duration_seconds_count \(s.durationCount)\n"
        out += "# HELP waybill_websockets_open Open WebSockets by group kind.\n# TYPE waybill_websockets_open gauge\n"
        for kind in ["company", "fleet", "driver", "pending"] {
            out += "waybill_websockets_open{group=\"\(kind)\"} \(s.openSockets[kind] ?? 0)\n"
        }
        out += counter("waybill_events_committed_total", "Order events committed to the outbox.", s.eventsCommitted)
        out += counter("waybill_events_relayed_total", "Events handed from the outbox to the broker.", s.eventsRelayed)
        out += counter("waybill_event_frames_sent_total", "Event frames queued on sockets.", s.framesSent)
        out += counter("waybill_relay_failures_total", "Failed or timed-out broker publishes.", s.relayFailures)
        out += counter("waybill_slow_consumer_closes_total", "Sockets closed with 4008.", s.slowConsumerCloses)
        out += counter("waybill_resumes_total", "Sockets that resumed (cursor or since).", s.resumes)
        out += counter("waybill_resets_total", "Resumes answered with reset.", s.resets)
        out += counter("waybill_feed_store_reads_total", "Store reads by the hub feed (gaps, broker down).", s.feedStoreReads)
        out += counter("waybill_history_rewinds_total", "Times the store's history went back under live sockets.", s.historyRewinds)
        out += "# HELP waybill_bound_overflows_total Times a memory or work bound was hit (docs/HARDENING.md).\n"
        out += "# TYPE waybill_bound_overflows_total counter\n"
        for bound in Bound.allCases {
            out += "waybill_bound_overflows_total{bound=\"\(bound.rawValue)\"} \(overflows(of: bound))\n"
        }
        out += counter(
            "waybill_store_checkpoint_failures_total", "Failed WAL checkpoints since the store opened (SQLite).",
            s.storeCheckpointFailures)
        if let pages = s.storeWALPages {
            out += "# HELP waybill_store_wal_pages Frames in the SQLite write-ahead log at the last commit, not the file's size on disk (growing while checkpoints succeed: a reader holds the log).\n"
            out += "# TYPE waybill_store_wal_pages gauge\nwaybill_store_wal_pages \(pages)\n"
        }
        out += counter(
            "waybill_http_requests_without_task_total",
            "Requests answered on the service thread without a Swift task (order writes on the idle SQLite writer).",
            s.requestsWithoutTask)
        out += "# HELP waybill_store_transactions_total Store transactions run by this node, by kind.\n"
        out += "# TYPE waybill_store_transactions_total counter\n"
        out += "waybill_store_transactions_total{kind=\"read\"} \(s.storeReads)\n"
        out += "waybill_store_transactions_total{kind=\"write\"} \(s.storeWrites)\n"
        out += "# HELP waybill_delivered_event_id Newest event id this node's hub has fanned out.\n"
        out += "# TYPE waybill_delivered_event_id gauge\nwaybill_delivered_event_id \(s.deliveredEventID)\n"
        out += "# HELP waybill_store_up Whether the store answered this scrape's query (1) or not (0).\n"
        out += "# TYPE waybill_store_up gauge\nwaybill_store_up \(outboxLagSeconds == nil ? 0 : 1)\n"
        out += "# HELP waybill_outbox_lag_seconds Age of the oldest event not yet relayed (0 if none, NaN if unknown).\n"
        out += "# TYPE waybill_outbox_lag_seconds gauge\nwaybill_outbox_lag_seconds \(outboxLagSeconds.map { "\($0)" } ?? "NaN")\n"
        return out
    }

    private func counter(_ name: String, _ help: String, _ value: Int) -> String {
        "# HELP \(name) \(help)\n# TYPE \(name) counter\n\(name) \(value)\n"
    }
}

/// A request counter's labels. Kept apart, not joined into one `"route|status"` text: that string
/// was built and hashed on every request (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
struct RequestKey: Hashable, Sendable {
    let route: String
    let status: Int

    /// The order `/metrics` lists them in: as the joined text sorted before.
    var sortText: String { "\(route)|\(status)" }
}
