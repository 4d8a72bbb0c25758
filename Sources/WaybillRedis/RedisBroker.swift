public import WaybillBroker
public import WaybillDomain

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `Broker` over Redis pub/sub, for running several Waybill nodes on one database.
///
/// Every node publishes the batches its relay reads from the outbox and subscribes to the same
/// channel. Pub/sub keeps nothing: a batch published while a node is not subscribed never reaches
/// it (39 of 100 were lost around a resubscribe in the notes, §7), which is why every subscription
/// says `.lost` and `.subscribed` and the consumer refills from the outbox on each `.subscribed`.
///
/// Two threads do all the blocking C work (hiredis 0.14.1, synchronous API), never Swift's
/// cooperative pool: a publisher thread (`publish` enqueues and awaits) and a subscriber thread
/// that serves every subscription of this broker over one connection. Each starts on first use.
/// Batches cross as `BrokerWireFormat` JSON.
///
/// ```swift
/// let broker = try RedisBroker(url: "redis://127.0.0.1:6379")
/// for await delivery in broker.subscribe() { … }      // .subscribed, .events(batch), .lost, …
/// try await broker.publish(batch)                      // throws BrokerError when Redis is down
/// broker.close()
/// ```
public final class RedisBroker: Broker {
    /// How serious a log line is.
    public enum LogLevel: Sendable { case info, warning }

    /// Receives the broker's log lines: a constant message and its fields (`redis.error`,
    /// `redis.channel`, `redis.url`; never a payload). Called on the broker's threads: keep it quick.
    public typealias LogHandler = @Sendable (_ level: LogLevel, _ message: String, _ fields: [String: String]) -> Void

    /// The channel every node of a deployment shares.
    public let channel: String
    private let publisher: RedisPublisher
    private let subscriber: RedisSubscriber

    /// Checks the URL and prepares the broker; connects only on first use (a Redis that is down at
    /// startup delays delivery, it does not stop the node).
    ///
    /// Ignores SIGPIPE for the whole process: hiredis 0.14.1 writes with plain `write()`, and a
    /// PUBLISH to a SIGKILLed Redis killed the process with SIGPIPE (notes §1).
    /// - Parameters:
    ///   - url: `redis://host[:port][/db]` (port 6379 by default; no credentials, no TLS).
    ///   - channel: the pub/sub channel (not empty).
    ///   - connectTimeout: bounds each TCP connect (a blackholed host waits exactly this long).
    ///   - commandTimeout: bounds each blocking read and write, so a frozen Redis fails a publish
    ///     after about this long instead of hanging it.
    ///   - publisherIdleReconnect: the publisher connects afresh before a PUBLISH after this long
    ///     without one (an idle connection may have been dropped silently on the way).
    ///   - logger: where connection changes and skipped messages are reported; nil for silence.
    /// - Throws: `BrokerError` with a one-line reason for a bad URL or channel.
    public init(
        url: String,
        channel: String = "waybill:events",
        connectTimeout: Duration = .seconds(1),
        commandTimeout: Duration = .seconds(1),
        publisherIdleReconnect: Duration = .seconds(30),
        logger: LogHandler? = nil
    ) throws {
        let parsed = try RedisURL(parsing: url)
        guard !channel.isEmpty, channel.utf8.count <= 1024 else {
            throw BrokerError("invalid Redis channel: must be 1 to 1024 bytes")
        }
        guard connectTimeout > .zero, commandTimeout > .zero else {
            throw BrokerError("Redis timeouts must be positive")
        }
        signal(SIGPIPE, SIG_IGN)
        self.channel = channel
        var settings = RedisSettings(
            url: parsed, channel: channel, connectTimeout: connectTimeout, commandTimeout: commandTimeout)
        settings.publisherIdleReconnect = publisherIdleReconnect
        let log = RedisLog(handler: logger)
        publisher = RedisPublisher(settings: settings, log: log)
        subscriber = try RedisSubscriber(settings: settings, log: log)
    }

    deinit { close() }

    /// PUBLISHes the batch as one message (empty batches are not sent).
    ///
    /// Returns once Redis has taken it, whether or not anyone is subscribed. Waits at most about
    /// `connectTimeout + commandTimeout` (plus the publish ahead of it); while Redis is known to be
    /// down it fails at once (retrying after 100 ms, doubling to 2 s).
    /// - Throws: `BrokerError` (the relay keeps its cursor and tries again).
    public func publish(_ events: [StoredEvent]) async throws {
        guard !events.isEmpty else { return }
        try await publisher.publish(BrokerWireFormat.encode(events))
    }

    /// A new subscription (see `Broker.subscribe`). `.subscribed` comes first, once the subscriber
    /// thread is subscribed; a dropped connection yields `.lost`, and `.subscribed` again after the
    /// reconnect. Ends when the broker is closed.
    public func subscribe() -> AsyncStream<BrokerDelivery> {
        subscriber.subscribe()
    }

    /// How many subscriptions are live; a subscription whose consumer stopped is gone.
    public var subscriptionCount: Int { subscriber.fanOut.count }

    /// Stops both threads, frees their connections and ends every subscription; later publishes
    /// throw. Returns within a connect or command timeout at worst. Idempotent; `deinit` calls it.
    public func close() {
        publisher.stop()
        subscriber.stop()
    }
}
