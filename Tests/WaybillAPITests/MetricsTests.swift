import Foundation
import Testing
import WaybillAPI
import WaybillDomain
import WaybillObservability
import WaybillSQLite
import WaybillStorage

/// `/metrics` counts what SPEC §2 and the issue name, with no user data in any label.
@Suite(.timeLimit(.minutes(1)))
struct MetricsTests {
    /// Request counters are kept by route and status apart and listed by `route|status` text, as
    /// when that text was their key: the order scrapers and golden files saw.
    @Test func requestCountersAreListedByRouteThenStatusText() {
        let metrics = Metrics()
        for (route, status) in [("/b", 200), ("/a", 404), ("network", 413), ("/a", 200), ("/a", 1000), ("/b", 200)] {
            metrics.recordRequest(route: route, status: status, duration: .milliseconds(1))
        }
        metrics.recordNetworkAnswer(status: 405)
        let lines = metrics.render(outboxLagSeconds: 0).split(separator: "\n").filter { $0.hasPrefix("waybill_http_requests_total{") }
        #expect(lines == [
            #"waybill_http_requests_total{route="/a",status="1000"} 1"#,
            #"waybill_http_requests_total{route="/a",status="200"} 1"#,
            #"waybill_http_requests_total{route="/a",status="404"} 1"#,
            #"waybill_http_requests_total{route="/b",status="200"} 2"#,
            #"waybill_http_requests_total{route="network",status="405"} 1"#,
            #"waybill_http_requests_total{route="network",status="413"} 1"#,
        ])
    }

    /// A store that cannot be read is reported as down, not as "no outbox lag" (which would
    /// look healthy on a dashboard while nothing is relayed).
    @Test func aStoreThatFailsShowsAsDownNotAsZeroLag() async throws {
        try await TestServer.withRunning { server in
            let healthy = try await server.request("GET", "/metrics").text
            #expect(healthy.contains("waybill_store_up 1\n"))
            #expect(healthy.contains("waybill_outbox_lag_seconds 0.0\n"))  // nothing waits: exactly zero
            server.store.close()
            let failing = try await server.request("GET", "/metrics").text
            #expect(failing.contains("waybill_store_up 0\n"))
            #expect(failing.contains("waybill_outbox_lag_seconds NaN\n"))
            #expect(!failing.contains("waybill_outbox_lag_seconds 0"))
            #expect(try await server.request("GET", "/readyz").status == 503)
        }
    }

    /// `deliveredThrough` (tests and tools poll it) answers after the server stopped instead of
    /// waiting forever for a service thread that is gone.
    @Test func deliveredThroughAnswersAfterShutdown() async throws {
        try await TestServer.withRunning { server in
            _ = try await server.seed(drivers: 1, orders: 1)
            let before = await server.server.deliveredThrough()
            #expect(before.rawValue > 0)
            await server.stopServer()
            let clock = ContinuousClock(), started = clock.now
            #expect(await server.server.deliveredThrough() == before)
            #expect(clock.now - started < .seconds(1))
            try await server.startServer()
        }
    }

    /// The SQLite store's write-ahead log size is exported: a reader that holds the log (a backup
    /// tool, an open `sqlite3` shell) makes it grow though every checkpoint succeeds, and nothing
    /// showed that before the disk filled.
    @Test func theWriteAheadLogsSizeIsExported() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let id = try #require(seed.drivers[0].orderIDs?.first)
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "w"])
            let text = try await server.request("GET", "/metrics").text
            let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("waybill_store_wal_pages ") })
            #expect((Int(line.split(separator: " ")[1]) ?? 0) >= 0)
            #expect(text.contains("# TYPE waybill_store_wal_pages gauge"))
            #expect(server.store.health.walPages != nil, "known after the first commit")
        }
    }

    @Test func countersFollowWritesSocketsResumesAndResets() async throws {
        try await TestServer.withRunning { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (live, connected) = try await server.connectedSocket(token: driver.token)
            let (panel, _) = try await server.connectedSocket(token: seed.dispatcherToken, query: "stream=fleet")
            _ = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "m"])
            #expect(await live.nextEvent() != nil)
            #expect(await panel.nextEvent() != nil)
            let cursor = try #require(connected["event_id"] as? Int)
            let (resumed, _) = try await server.connectedSocket(token: driver.token, query: "since=\(cursor)")
            #expect(await resumed.nextEvent() != nil)
            let (reset, _) = try await server.connectedSocket(token: driver.token, query: "since=999999")
            #expect(await reset.next()?["type"] as? String == "reset")
            // The sockets got the PATCH from this node's commit; the relay publishes on its own time
            // (a scrape right away once saw 1 relayed, and a lag of 0.11 s): read until all is relayed.
            func relayed(_ text: String) -> Int {
                let line = text.split(separator: "\n").first { $0.hasPrefix("waybill_events_relayed_total ") }
                return line.flatMap { Int($0.split(separator: " ")[1]) } ?? 0
            }
            var text = ""
            #expect(
                try await server.eventually {
                    text = try await server.request("GET", "/metrics").text
                    // The seeded order_created and the PATCH at least; nothing left waiting.
                    return relayed(text) >= 2 && text.contains("waybill_outbox_lag_seconds 0.0\n")
                })
            #expect(text.contains(#"waybill_websockets_open{group="driver"} 3"#))
            #expect(text.contains(#"waybill_websockets_open{group="fleet"} 1"#))
            #expect(text.contains("waybill_resumes_total 2"))
            #expect(text.contains("waybill_resets_total 1"))
            #expect(text.contains("waybill_events_committed_total 1"))  // the PATCH; seeding ran outside the server
            #expect(text.contains(#"waybill_http_requests_total{route="/api/orders/{id}",status="200"} 1"#))
            #expect(text.contains("waybill_http_request_duration_seconds_count"))
            for secret in [driver.token, seed.dispatcherToken, driver.email] { #expect(!text.contains(secret)) }
        }
    }
}

/// Request durations reach the histogram whole: seconds and their fraction.
struct RequestDurationMetricsTests {
    @Test func aRequestOfOneAndAHalfSecondsIsRecordedAsOneAndAHalf() {
        let metrics = Metrics()
        metrics.recordRequest(route: "/api/orders/", status: 200, duration: .milliseconds(1500))
        let text = metrics.render(outboxLagSeconds: 0)
        #expect(text.contains("waybill_http_request_duration_seconds_sum 1.5\n"))
        #expect(text.contains("waybill_http_request_duration_seconds_bucket{le=\"1.0\"} 0\n"))
        #expect(text.contains("waybill_http_request_duration_seconds_bucket{le=\"2.5\"} 1\n"))
    }
}

/// Every bound is exported from the start (at 0), with counts kept here or read at scrape time.
struct BoundOverflowMetricsTests {
    @Test func everyBoundIsExportedAndScrapeTimeCountsAreAdded() {
        let metrics = Metrics()
        let before = metrics.render(outboxLagSeconds: 0)
        for bound in Metrics.Bound.allCases {
            #expect(before.contains("waybill_bound_overflows_total{bound=\"\(bound.rawValue)\"} 0\n"))
        }
        metrics.overflowed(.replayBuffer)
        metrics.overflowed(.replayBuffer)
        metrics.readAtScrape(.brokerBuffer) { 5 }
        metrics.storeCheckpointFailures(3)
        let after = metrics.render(outboxLagSeconds: 0)
        #expect(after.contains("waybill_bound_overflows_total{bound=\"replay_buffer\"} 2\n"))
        #expect(after.contains("waybill_bound_overflows_total{bound=\"broker_buffer\"} 5\n"))
        #expect(after.contains("waybill_store_checkpoint_failures_total 3\n"))
    }
}
