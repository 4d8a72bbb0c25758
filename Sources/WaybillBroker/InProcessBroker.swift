public import WaybillDomain
import Synchronization

/// The embedded default: delivers published batches to this process's subscribers.
///
/// `publish` never blocks on a subscriber: each subscription buffers without limit, because the
/// one subscriber (the hub feed) drains on its own task and must not lose events.
public final class InProcessBroker: Broker {
    private let subscribers = Mutex<[Int: AsyncStream<BrokerDelivery>.Continuation]>([:])
    private let nextID = Atomic<Int>(0)

    public init() {}

    /// `publish` only yields to unbounded in-memory streams: it cannot stall.
    public var publishNeverStalls: Bool { true }

    public func publish(_ events: [StoredEvent]) async throws {
        guard !events.isEmpty else { return }
        let targets = subscribers.withLock { Array($0.values) }
        for continuation in targets { continuation.yield(.events(events)) }
    }

    public func subscribe() -> AsyncStream<BrokerDelivery> {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let (stream, continuation) = AsyncStream.makeStream(of: BrokerDelivery.self, bufferingPolicy: .unbounded)
        continuation.yield(.subscribed)
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }
}
