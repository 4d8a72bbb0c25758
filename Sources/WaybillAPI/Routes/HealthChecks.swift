import Foundation
import WaybillNetwork
import WaybillObservability
import WaybillStorage

/// `/readyz` (the store answers and reports no problem) and `/metrics` (with the outbox lag
/// measured and the store's health read at scrape time).
struct HealthChecks: Sendable {
    let store: any OrderStore
    let metrics: Metrics
    let clock: any WallClock

    /// - Parameter stopping: the server is stopping (the request came on a connection it kept):
    ///   not ready, whatever the store says, so a health checker stops sending work here.
    func ready(stopping: Bool = false) async throws -> HTTPResponse {
        if stopping {
            return try JSONCoding.response(["status": "unavailable", "reason": "shutting_down"], status: 503)
        }
        do {
            _ = try await store.read { tx in try tx.newestEventID() }
        } catch {
            return try JSONCoding.response(["status": "unavailable", "reason": "store_unreachable"], status: 503)
        }
        // A store that answers but knows it is in trouble (its WAL grows without bound) is not ready.
        let health = store.health
        guard health.isHealthy else {
            let reason = health.problems.joined(separator: ",")
            return try JSONCoding.response(["status": "unavailable", "reason": reason], status: 503)
        }
        return try JSONCoding.response(["status": "ok"])
    }

    func metricsText() async -> HTTPResponse {
        // A failed read is reported as such (store down, lag unknown), not as "no lag".
        let lag: Double?
        do {
            let oldest = try await store.read { tx in try tx.oldestUnrelayedEventTime() }
            lag = oldest.map { max(0, clock.now().timeIntervalSince($0)) } ?? 0
        } catch {
            lag = nil
        }
        let health = store.health
        metrics.storeCheckpointFailures(health.checkpointFailures)
        metrics.storeWALPages(health.walPages)
        var headers = HTTPHeaders()
        headers.set("Content-Type", "text/plain; version=0.0.4")
        return HTTPResponse(status: 200, headers: headers, body: Array(metrics.render(outboxLagSeconds: lag).utf8))
    }
}
