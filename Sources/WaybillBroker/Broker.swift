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

    /// A new subscription: every batch published from now on, in publish order.
    /// The stream ends when the subscription is lost (the subscriber then resyncs from the outbox).
    func subscribe() -> AsyncStream<[StoredEvent]>
}

/// A broker could not take or deliver events.
public struct BrokerError: Error, Equatable, Sendable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "broker error: \(message)" }
}
