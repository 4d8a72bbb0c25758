import Synchronization
import Testing
import WaybillBroker
import WaybillDomain
import WaybillObservability
import WaybillRealtime
import WaybillSQLite
import WaybillStorage
import WaybillTesting

/// A follower's commit wakes the leader's relay through the broker (an empty batch), so events
/// committed on another node go out at once instead of at the leader's next outbox poll.
@Suite(.timeLimit(.minutes(1)))
struct RelayCommitHintTests {
    /// A network broker in one process: what is published reaches every subscription.
    final class LoopbackBroker: Broker {
        private let subscribers = Mutex<[AsyncStream<BrokerDelivery>.Continuation]>([])
        private let published = Mutex<[EventID]>([])
        private let hints = Atomic<Int>(0)

        func publish(_ events: [StoredEvent]) async throws {
            published.withLock { $0 += events.map(\.id) }
            for continuation in subscribers.withLock({ $0 }) { continuation.yield(.events(events)) }
        }

        func publishCommitHint() async throws {
            hints.add(1, ordering: .relaxed)
            for continuation in subscribers.withLock({ $0 }) { continuation.yield(.events([])) }
        }

        func subscribe() -> AsyncStream<BrokerDelivery> {
            let (stream, continuation) = AsyncStream.makeStream(of: BrokerDelivery.self)
            continuation.yield(.subscribed)
            subscribers.withLock { $0.append(continuation) }
            return stream
        }

        var publishedIDs: [EventID] { published.withLock { $0 } }
        var hintCount: Int { hints.load(ordering: .relaxed) }
    }

    @Test func aFollowersCommitWakesTheLeaderAtOnce() async throws {
        try await withStore { store in
            let broker = LoopbackBroker(), clock = TestClock()
            // No poll within the test: only a hint can wake the leader.
            var configuration = OutboxRelay.Configuration(pollInterval: .seconds(3600))
            configuration.historyCheckInterval = .seconds(3600)
            let leader = OutboxRelay(
                store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, configuration: configuration,
                clock: clock)
            let follower = OutboxRelay(
                store: store, broker: broker, metrics: Metrics(), logger: Fixtures.logger, configuration: configuration,
                clock: clock)
            let leading = Task { await leader.run() }
            defer { leading.cancel() }
            #expect(await eventually { leader.isLeading })
            let following = Task { await follower.run() }
            defer { following.cancel() }
            // The leader's first round is over, and its cursor saved: from here on it only waits.
            #expect(
                try await eventually {
                    await clock.advance(by: .milliseconds(100))
                    return try await store.read { tx in try tx.relayedThrough() } == .zero
                        && !follower.isLeading
                })
            let events = try await store.append(2)  // committed on the follower's node
            follower.committed(events)
            #expect(await eventually { broker.publishedIDs == events.map(\.id) })
            #expect(broker.hintCount >= 1)
            leading.cancel()
            following.cancel()
            await leading.value
            await following.value
        }
    }
}
