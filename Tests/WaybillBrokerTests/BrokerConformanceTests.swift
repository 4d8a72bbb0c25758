import Testing
import WaybillBroker
import WaybillDomain
import WaybillTesting

/// The `Broker` contract, run on every broker (GRDB's "one body, every connection kind").
@Suite(.timeLimit(.minutes(1)))
struct BrokerConformanceTests {
    @Test(arguments: BrokerKind.allCases)
    func firstDeliveryIsSubscribed(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let subscription = DeliveryCollector(fixture.broker.subscribe())
            #expect(await subscription.wait { !$0.isEmpty })
            #expect(subscription.deliveries.first == .subscribed)
        }
    }

    @Test(arguments: BrokerKind.allCases)
    func batchesArriveInPublishOrderWithEveryField(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let subscription = DeliveryCollector(fixture.broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            let sizes = (0..<60).map { $0 % 7 + 1 }
            var next: Int64 = 1
            let batches = sizes.map { size in
                defer { next += Int64(size) }
                return sampleEvents(next...(next + Int64(size) - 1))
            }
            for batch in batches { try await fixture.broker.publish(batch) }

            #expect(await subscription.waitForEvents(Int(next - 1)))
            #expect(subscription.batches == batches)
            #expect(subscription.events.map(\.cursor) == batches.flatMap { $0 }.map(\.cursor))
            #expect(subscription.deliveries.filter { $0 == .lost }.isEmpty)
        }
    }

    @Test(arguments: BrokerKind.allCases)
    func twoSubscriptionsBothReceiveEverything(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let first = DeliveryCollector(fixture.broker.subscribe())
            let second = DeliveryCollector(fixture.broker.subscribe())
            #expect(await first.waitForSubscribed())
            #expect(await second.waitForSubscribed())
            let batches = [sampleEvents(1...5), sampleEvents(6...9)]
            for batch in batches { try await fixture.broker.publish(batch) }

            #expect(await first.waitForEvents(9))
            #expect(await second.waitForEvents(9))
            #expect(first.batches == batches)
            #expect(second.batches == batches)
        }
    }

    @Test(arguments: BrokerKind.allCases)
    func endedSubscriptionStopsReceivingAndOthersCarryOn(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let leaving = DeliveryCollector(fixture.broker.subscribe())
            let staying = DeliveryCollector(fixture.broker.subscribe())
            #expect(await leaving.waitForSubscribed())
            #expect(await staying.waitForSubscribed())
            try await fixture.broker.publish(sampleEvents(1...2))
            #expect(await leaving.waitForEvents(2))

            leaving.cancel()
            #expect(await leaving.wait { _ in leaving.isFinished })
            try await fixture.broker.publish(sampleEvents(3...4))
            try await fixture.broker.publish(sampleEvents(5...5))

            #expect(await staying.waitForEvents(5))
            #expect(staying.events.map(\.id) == (1...5).map(EventID.init))
            #expect(leaving.events.map(\.id) == [1, 2])
            // A subscription started after the cancel still works.
            let late = DeliveryCollector(fixture.broker.subscribe())
            #expect(await late.waitForSubscribed())
            try await fixture.broker.publish(sampleEvents(6...6))
            #expect(await late.waitForEvents(1))
            #expect(late.events.map(\.id) == [6])
        }
    }

    /// Publishers racing each other lose nothing, and each one's batches keep their order.
    @Test(arguments: BrokerKind.allCases)
    func concurrentPublishersLoseNothing(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let subscription = DeliveryCollector(fixture.broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            let broker = fixture.broker
            try await withThrowingTaskGroup(of: Void.self) { group in
                for publisher in 0..<20 {
                    group.addTask {
                        for round in 0..<5 {
                            let first = Int64(publisher * 10 + round * 2 + 1)
                            try await broker.publish(sampleEvents(first...(first + 1)))
                        }
                    }
                }
                try await group.waitForAll()
            }

            #expect(await subscription.waitForEvents(200))
            let ids = subscription.events.map(\.id.rawValue)
            #expect(Set(ids) == Set(1...200))
            for publisher in 0..<20 {
                let own = ids.filter { ($0 - 1) / 10 == Int64(publisher) }
                #expect(own == own.sorted())
            }
        }
    }

    @Test(arguments: BrokerKind.allCases)
    func largeBatchArrivesWhole(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            let subscription = DeliveryCollector(fixture.broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            let batch = sampleEvents(1...2000)
            try await fixture.broker.publish(batch)

            #expect(await subscription.waitForEvents(2000, timeout: .seconds(10)), "got: \(subscription.summary)")
            #expect(subscription.batches.count == 1)
            #expect(subscription.batches.first == batch)
        }
    }

    /// Publishing is never conditional on a listener; a later subscription sees only later batches.
    @Test(arguments: BrokerKind.allCases)
    func publishWithoutSubscriberSucceeds(kind: BrokerKind) async throws {
        try await withBrokerFixture(kind) { fixture in
            try await fixture.broker.publish(sampleEvents(1...3))
            try await fixture.broker.publish([])

            let subscription = DeliveryCollector(fixture.broker.subscribe())
            #expect(await subscription.waitForSubscribed())
            try await fixture.broker.publish(sampleEvents(4...4))
            #expect(await subscription.waitForEvents(1))
            #expect(subscription.deliveries == [.subscribed, .events(sampleEvents(4...4))])
        }
    }
}
