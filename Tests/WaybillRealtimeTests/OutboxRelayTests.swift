import Foundation
import Testing
@testable import WaybillRealtime
import WaybillBroker
import WaybillDomain

/// The relay's fast path publishes handed-over events only when they continue its cursor exactly.
struct OutboxRelayTests {
    static func events(_ ids: [Int64]) -> [StoredEvent] {
        ids.map { id in
            StoredEvent(
                id: EventID(id),
                event: OrderEvent(
                    type: .updated, companyID: 1, orderID: 1, number: "n", oldStatus: nil, newStatus: .new, driverID: nil,
                    changedAt: Date(timeIntervalSince1970: 0), groups: [.company(1)]))
        }
    }

    @Test func contiguousEventsAfterTheCursorContinueIt() {
        #expect(OutboxRelay.continues(EventID(4), Self.events([5, 6, 7])))
    }

    @Test func aGapOrAnOverlapFallsBackToTheStore() {
        #expect(!OutboxRelay.continues(EventID(4), Self.events([6, 7])))  // 5 came from another process
        #expect(!OutboxRelay.continues(EventID(4), Self.events([5, 7])))
        #expect(!OutboxRelay.continues(EventID(4), Self.events([4, 5])))
    }

    /// The retry pause after a failed round: 100 ms doubled per failure, up to the cap, including a
    /// cap under a second (it was read in whole seconds: 0, no pause at all).
    @Test func theBackoffDoublesUpToItsCapEvenUnderASecond() {
        #expect(OutboxRelay.backoff(1, max: .seconds(1)) == .milliseconds(200))
        #expect(OutboxRelay.backoff(3, max: .seconds(1)) == .milliseconds(800))
        #expect(OutboxRelay.backoff(9, max: .seconds(1)) == .seconds(1))
        #expect(OutboxRelay.backoff(1, max: .milliseconds(500)) == .milliseconds(200))
        #expect(OutboxRelay.backoff(4, max: .milliseconds(500)) == .milliseconds(500))
        #expect(OutboxRelay.backoff(40, max: .milliseconds(1500)) == .milliseconds(1500))
    }
}

/// Only a broker that says its publish cannot stall is called without the timeout's tasks and timer.
struct BrokerStallTests {
    @Test func onlyTheInProcessBrokerSkipsThePublishTimeout() {
        #expect(InProcessBroker().publishNeverStalls)
        #expect(!ScriptedBroker().publishNeverStalls)  // any other broker keeps the bounded publish
    }
}
