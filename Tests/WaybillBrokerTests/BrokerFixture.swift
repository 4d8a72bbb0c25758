import Foundation
import WaybillBroker
import WaybillDomain
import WaybillRedis
import WaybillTesting

/// The brokers every conformance test runs on.
enum BrokerKind: String, CaseIterable, Sendable, CustomStringConvertible {
    case inProcess
    case redis

    var description: String { rawValue }
}

/// Runs `body` with a fresh fixture of `kind`, then tears it down however `body` ends. Starting and
/// stopping a Redis server (spawn, wait until it answers; close joins the broker's threads, then
/// kill and reap) block, so they run on a thread of their own: on the 2-thread cooperative pool of
/// a 2-core machine, several parameterised cases doing it at once stalled the timed Redis and
/// PostgreSQL failure tests running in the same process.
func withBrokerFixture(_ kind: BrokerKind, _ body: (BrokerFixture) async throws -> Void) async throws {
    let fixture = try await runBlocking { try BrokerFixture(kind) }
    let result = await outcome { try await body(fixture) }
    _ = try? await runBlocking { fixture.tearDown() }
    try result.get()
}

/// A broker of one kind, plus the Redis server behind it (a fresh one per test, on its own port).
final class BrokerFixture: Sendable {
    let broker: any Broker
    let redis: RedisServer?

    init(_ kind: BrokerKind) throws {
        switch kind {
        case .inProcess:
            broker = InProcessBroker()
            redis = nil
        case .redis:
            let server = try RedisServer()
            redis = server
            // The conformance tests are about what a broker delivers, not its time bounds (those:
            // RedisBrokerFailureTests): a 1 s command bound failed a publish when a busy runner
            // held Redis's process that long.
            broker = try RedisBroker(url: server.url, connectTimeout: .seconds(5), commandTimeout: .seconds(10))
        }
    }

    /// Closes the broker (Redis) and stops the server.
    func tearDown() {
        (broker as? RedisBroker)?.close()
        redis?.stop()
    }
}

/// Sample committed events with every field set somewhere: optional fields present and absent,
/// several groups, awkward order numbers, dates at millisecond precision.
func sampleEvents(_ ids: ClosedRange<Int64>) -> [StoredEvent] {
    let numbers = ["A-1", "Ünïcödé ☃ 🚚", "quote \" backslash \\ slash /", "line\nbreak\ttab", "nul\u{0}byte", ""]
    return ids.map { id in
        let kind = OrderEventType.allCases[Int(id) % OrderEventType.allCases.count]
        let driver: UserID? = id % 2 == 0 ? UserID(100 + id) : nil
        let event = OrderEvent(
            type: kind, companyID: CompanyID(1 + id % 3), orderID: OrderID(1000 + id),
            number: numbers[Int(id) % numbers.count],
            oldStatus: id % 3 == 0 ? nil : .assigned, newStatus: OrderStatus.allCases[Int(id) % 6],
            driverID: driver, oldDriverID: id % 5 == 0 ? UserID(7) : nil,
            changedAt: BrokerWireFormat.date(milliseconds: 1_764_547_200_000 + id * 37),
            groups: [.company(CompanyID(1 + id % 3)), .fleet(CompanyID(1 + id % 3))]
                + (driver.map { [.driver($0)] } ?? []))
        // Every other event has a salt (the cursor's secret; events stored before it have none).
        return StoredEvent(
            id: EventID(id), event: event, committedAt: BrokerWireFormat.date(milliseconds: 1_764_547_200_005 + id * 37),
            salt: id % 2 == 0 ? 0 : Int64.max - id * 1_000_003)
    }
}
