import Foundation
import Synchronization
import Testing
import WaybillAPI
import WaybillBroker
import WaybillDomain

/// A broker test double behind the real protocol: healthy, failing or stalled on command.
final class ControllableBroker: Broker {
    enum Mode { case healthy, failing, stalled }
    private let inner = InProcessBroker()
    private let mode = Mutex(Mode.healthy)

    func set(_ newMode: Mode) { mode.withLock { $0 = newMode } }

    func publish(_ events: [StoredEvent]) async throws {
        switch mode.withLock({ $0 }) {
        case .healthy: try await inner.publish(events)
        case .failing: throw BrokerError("down for the test")
        case .stalled:
            // Hangs, deaf to cancellation, until the mode changes: a broker that hangs.
            while mode.withLock({ $0 }) == .stalled { await Self.uncancellablePause() }
            try await inner.publish(events)
        }
    }

    func subscribe() -> AsyncStream<BrokerDelivery> { inner.subscribe() }

    /// 20 ms that cancellation cannot cut short (a cancelled `Task.sleep` returns at once).
    private static func uncancellablePause() async {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { continuation.resume() }
        }
    }
}

@Suite(.timeLimit(.minutes(1)))
struct BrokerFailureTests {
    @Test(arguments: [ControllableBroker.Mode.failing, .stalled])
    func writesStayFastWhileTheBrokerIsDownAndEveryEventArrivesAfter(mode: ControllableBroker.Mode) async throws {
        let broker = ControllableBroker()
        try await TestServer.withRunning(broker: broker, configure: { $0.publishTimeout = .seconds(5) }) { server in
            let seed = try await server.seed(drivers: 1, orders: 1)
            let driver = seed.drivers[0], id = try #require(driver.orderIDs?.first)
            let (socket, _) = try await server.connectedSocket(token: driver.token)
            broker.set(mode)
            let clock = ContinuousClock()
            for n in 0..<10 {
                let elapsed = try await clock.measure {
                    let answer = try await server.request("PATCH", "/api/orders/\(id)/", token: seed.dispatcherToken, json: ["notes": "\(n)"])
                    #expect(answer.status == 200)
                }
                // A write that waited for a stalled broker would take the 5 s publish timeout or longer.
                #expect(elapsed < .seconds(2), "a write must not wait for the broker")
            }
            #expect(await socket.nextEvent(timeout: .milliseconds(500)) == nil, "nothing gets through while it is down")
            let metrics = try await server.request("GET", "/metrics").text
            #expect(!metrics.contains("waybill_outbox_lag_seconds 0\n"))
            broker.set(.healthy)
            var ids: [Int] = []
            for _ in 0..<10 {
                let frame = try #require(await socket.nextEvent(timeout: .seconds(15)))
                ids.append(try #require(frame["event_id"] as? Int))
            }
            #expect(ids == ids.sorted() && Set(ids).count == 10)
            #expect(await socket.nextEvent(timeout: .milliseconds(500)) == nil, "no duplicates after recovery")
        }
    }
}

extension ControllableBroker.Mode: CustomTestStringConvertible {
    var testDescription: String { "\(self)" }
}
