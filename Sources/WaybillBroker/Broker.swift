public import WaybillDomain

/// Carries committed events from the outbox relay to every node's hub.
///
/// Publishing is a side effect of a write, never a condition of it: the relay calls `publish`
/// after commit, and a broker that fails only delays delivery (the events wait in the outbox).
/// Implementations: `InProcessBroker` (one node); a Redis broker follows for scale-out, so
/// nothing here assumes a shared address space: events cross as values.
public protocol Broker: Sendable {
    /// Publishes a batch of committed events, in `event_id` order.
    /// - Throws: `BrokerError` when the broker cannot take them now (the relay retries).
    func publish(_ events: [StoredEvent]) async throws

    /// A new subscription, alive until the consumer stops iterating (or cancels its task).
    ///
    /// It first yields `.subscribed`, then every batch published from then on, in publish order.
    /// When the connection to the broker drops it yields `.lost` and reconnects by itself with
    /// backoff; once subscribed again it yields `.subscribed`. Batches published between `.lost`
    /// and `.subscribed` are never delivered: the consumer reads them from the outbox (event ids
    /// are dense, so a jump in ids also shows a batch that went missing).
    func subscribe() -> AsyncStream<BrokerDelivery>

    /// Batches this process's subscriptions dropped because their consumer fell behind their
    /// buffer bound (a metric; the consumer fills such gaps from the outbox).
    var droppedBatches: Int { get }

    /// Whether `publish` returns at once whatever happens (it only hands the batch to memory), so a
    /// caller needs no timeout around it. `false` unless a broker says otherwise.
    var publishNeverStalls: Bool { get }

    /// How many subscriptions are open on this broker, when it can know (in-process: all of them
    /// are in this process); `nil` for a network broker. The relay uses it on the local path: an
    /// event the committing server's feed already has must still be published while another
    /// server in this process subscribes to the same broker.
    var subscriptionCount: Int? { get }
}

extension Broker {
    /// No bounded buffer of its own: nothing dropped.
    public var droppedBatches: Int { 0 }
    public var publishNeverStalls: Bool { false }
    public var subscriptionCount: Int? { nil }
}

/// What a broker subscription yields.
public enum BrokerDelivery: Sendable, Equatable {
    /// Subscribed (first, and again after every reconnect): live batches follow.
    case subscribed
    /// A batch of committed events, ascending by id.
    case events([StoredEvent])
    /// The subscription dropped: until the next `.subscribed`, published batches are missed.
    case lost
    /// A message on the channel could not be read (a newer wire format during a rolling upgrade,
    /// a truncated or foreign message): batches may be missing, and the consumer reads the store
    /// now rather than at its next gap or periodic check. The subscription stays up.
    case skipped
}

/// A broker could not take or deliver events.
public struct BrokerError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "broker error: \(message)" }
}
