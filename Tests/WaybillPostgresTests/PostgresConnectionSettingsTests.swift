import Foundation
import Testing

@testable import WaybillPostgres

@Suite struct PostgresConnectionSettingsTests {
    private func keywords(_ url: String) throws -> [String: String] {
        let settings = try PostgresConnectionSettings(url: url, applicationName: "node-1")
        return Dictionary(settings.keywords, uniquingKeysWith: { _, last in last })
    }

    @Test func aNumericHostBecomesHostaddrAndTheRestMapsToKeywords() throws {
        let found = try keywords("postgresql://way%40bill:p%3Ass@127.0.0.1:6543/orders?sslmode=disable")
        #expect(found["hostaddr"] == "127.0.0.1")
        #expect(found["host"] == nil, "no DNS lookup for a numeric address")
        #expect(found["port"] == "6543")
        #expect(found["user"] == "way@bill")
        #expect(found["password"] == "p:ss")
        #expect(found["dbname"] == "orders")
        #expect(found["sslmode"] == "disable")
        #expect(found["application_name"] == "node-1")
    }

    @Test func aHostNameStaysAHostAndThePortDefaults() throws {
        let found = try keywords("postgres://waybill@db.internal/waybill")
        #expect(found["host"] == "db.internal")
        #expect(found["port"] == "5432")
        #expect(found["password"] == nil)
    }

    /// Pool and lease sessions connect only to a server that takes writes (a standby under the
    /// primary's address after a failover is refused at connect), unless the URL says otherwise.
    @Test func poolAndLeaseConnectionsAskForAReadWriteServer() throws {
        let settings = try PostgresConnectionSettings(url: "postgresql://u@127.0.0.1/db", applicationName: "n")
        for keywords in [settings.forPool.keywords, settings.forLease.keywords] {
            #expect(keywords.filter { $0.0 == "target_session_attrs" }.map(\.1) == ["read-write"])
        }
        let chosen = try PostgresConnectionSettings(url: "postgresql://u@127.0.0.1/db?target_session_attrs=any", applicationName: "n")
        #expect(chosen.forPool.keywords.filter { $0.0 == "target_session_attrs" }.map(\.1) == ["any"])
    }

    @Test func poolAndLeaseConnectionsCarryTheirTimeouts() throws {
        let settings = try PostgresConnectionSettings(url: "postgresql://u@127.0.0.1/db", applicationName: "n")
        let pool = Dictionary(settings.forPool.keywords, uniquingKeysWith: { _, last in last })
        #expect(pool["connect_timeout"] == "2")
        #expect(pool["options"]?.contains("statement_timeout=4000") == true)
        #expect(pool["options"]?.contains("TimeZone=UTC") == true)
        let lease = Dictionary(settings.forLease.keywords, uniquingKeysWith: { _, last in last })
        #expect(lease["tcp_user_timeout"] == "3000")
        #expect(lease["options"]?.contains("idle_session_timeout=5000") == true)
    }

    /// The operator's `options` in the URL are kept; ours follow (the last `-c` of a name wins).
    @Test func optionsInTheURLAreKeptBeforeOurs() throws {
        let settings = try PostgresConnectionSettings(
            url: "postgresql://u@127.0.0.1/db?options=-c%20search_path%3Dwaybill", applicationName: "n")
        for connection in [settings.forPool, settings.forLease] {
            let options = try #require(connection.keywords.last { $0.0 == "options" }?.1)
            #expect(options.hasPrefix("-c search_path=waybill -c "))
            #expect(options.contains("statement_timeout=4000"))
            #expect(connection.keywords.filter { $0.0 == "options" }.count == 1)
        }
    }

    @Test func theDisplayNameNeverShowsThePassword() throws {
        let settings = try PostgresConnectionSettings(
            url: "postgresql://u:hunter2@10.0.0.5:5433/db", applicationName: "n")
        #expect(settings.displayName == "10.0.0.5:5433/db")
    }
}
