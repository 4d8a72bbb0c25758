public import WaybillDomain
import Synchronization

/// The embedded default: delivers published batches to this process's subscribers.
///
/// `publish` never blocks on a subscriber. Each subscription buffers at most `maxBufferedBatches`
/// batches; past that the oldest batch is dropped (and counted in `droppedBatches`), so a consumer
/// that stalls cannot grow memory without limit. Dropping is safe under the `Broker` contract:
/// event ids are dense, so the consumer (the hub feed) sees the jump and reads the missing events
/// from the outbox, as after any lost batch.
public final class InProcessBroker: Broker {
    private let subscribers = Mutex<[Int: AsyncStream<BrokerDelivery>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    /// Batches one subscription holds before its oldest is dropped.
    public let maxBufferedBatches: Int

    /// - Parameter maxBufferedBatches: per subscription, at least 1 (4,096 batches: seconds of a
    ///   busy node's events, at most a few MB).
    public init(maxBufferedBatches: Int = 4096) {
        self.maxBufferedBatches = max(1, maxBufferedBatches)
    }

    /// Batches dropped so far because a subscriber's buffer was full.
    public var droppedBatches: Int { dropped.load(ordering: .relaxed) }

    /// `publish` only yields to in-memory streams that drop their oldest batch when full: it cannot stall.
    public var publishNeverStalls: Bool { true }

    public var subscriptionCount: Int? { subscribers.withLock { $0.count } }

    public func publish(_ events: [StoredEvent]) async throws {
        guard !events.isEmpty else { return }
        let targets = subscribers.withLock { Array($0.values) }
        for continuation in targets {
            // What is pushed out may be the first `.subscribed`; only batches count.
            if case .dropped(.events) = continuation.yield(.events(events)) { dropped.add(1, ordering: .relaxed) }
        }
    }

    public func subscribe() -> AsyncStream<BrokerDelivery> {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(
            of: BrokerDelivery.self, bufferingPolicy: .bufferingNewest(maxBufferedBatches))
        continuation.yield(.subscribed)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }
}
