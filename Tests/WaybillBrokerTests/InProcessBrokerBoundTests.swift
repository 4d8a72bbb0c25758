import Testing
import WaybillBroker
import WaybillDomain

/// A subscriber that stops reading cannot grow the in-process broker's memory without limit.
@Suite(.timeLimit(.minutes(1)))
struct InProcessBrokerBoundTests {
    @Test func aStalledSubscriptionKeepsTheNewestBatchesAndCountsTheDropped() async throws {
        let broker = InProcessBroker(maxBufferedBatches: 4)
        let subscription = broker.subscribe()  // not read while publishing
        let batches = (1...10).map { sampleEvents(Int64($0)...Int64($0)) }
        for batch in batches { try await broker.publish(batch) }
        // `.subscribed` and the six oldest batches were pushed out; the six count as dropped.
        #expect(broker.droppedBatches == 6)

        var received: [BrokerDelivery] = []
        for await delivery in subscription {
            received.append(delivery)
            if received.count == 4 { break }
        }
        // The newest are kept, so the jump from what the consumer had shows it the gap.
        #expect(received == batches.suffix(4).map { .events($0) })
    }

    @Test func aSubscriberThatKeepsUpLosesNothing() async throws {
        let broker = InProcessBroker(maxBufferedBatches: 4)
        let subscription = broker.subscribe()
        var iterator = subscription.makeAsyncIterator()
        #expect(await iterator.next() == .subscribed)
        for id in Int64(1)...20 {
            try await broker.publish(sampleEvents(id...id))
            #expect(await iterator.next() == .events(sampleEvents(id...id)))
        }
        #expect(broker.droppedBatches == 0)
    }

    /// The relay's local path asks it: a second subscriber means another server in this process.
    @Test func itCountsItsOpenSubscriptions() async throws {
        let broker = InProcessBroker()
        #expect(broker.subscriptionCount == 0)
        let first = broker.subscribe()
        var second: AsyncStream<BrokerDelivery>? = broker.subscribe()
        #expect(broker.subscriptionCount == 2)
        second = nil  // dropping a stream terminates it
        _ = second
        #expect(broker.subscriptionCount == 1)
        _ = first
        #expect(ScriptedNothing().subscriptionCount == nil, "a broker that cannot know says nil")
    }
}

/// A broker with only the protocol's defaults.
private struct ScriptedNothing: Broker {
    func publish(_ events: [StoredEvent]) async throws {}
    func subscribe() -> AsyncStream<BrokerDelivery> { AsyncStream { $0.finish() } }
}
