import Synchronization
public import WaybillBroker
public import WaybillDomain
public import WaybillObservability
public import WaybillStorage

/// Hands committed outbox events to the broker, in `event_id` order, after their transaction committed.
///
/// Writes never wait for it: `notify()` only sets a flag. If the broker fails or stalls (each
/// publish is bounded by `publishTimeout`), the events stay in the outbox and the relay retries with
/// backoff from the same cursor, so they go out in order once the broker is back. The cursor is
/// persisted (`markRelayed`) so a restart continues where it stopped.
public final class OutboxRelay: Sendable {
    public struct Configuration: Sendable {
        public var publishTimeout: Duration = .seconds(2)
        /// Safety net: also look for events committed by other processes on the same store.
        public var pollInterval: Duration = .seconds(1)
        public var batchSize = 512
        public var maxBackoff: Duration = .seconds(5)
        /// How often, at most, the relay cursor is written to the store.
        public var persistInterval: Duration = .milliseconds(100)

        public init(publishTimeout: Duration = .seconds(2), pollInterval: Duration = .seconds(1)) {
            self.publishTimeout = publishTimeout
            self.pollInterval = pollInterval
        }
    }

    private let store: any OrderStore
    private let broker: any Broker
    private let metrics: Metrics
    private let logger: Logger
    private let configuration: Configuration
    private let clock: ContinuousClock
    private let wake = WakeSignal()
    /// Events this process committed, handed over after commit: published without a store read
    /// when they continue the cursor with no gap (the usual case); anything else goes the slow way.
    private let handed = Mutex<[StoredEvent]>([])

    public init(
        store: any OrderStore, broker: any Broker, metrics: Metrics, logger: Logger,
        configuration: Configuration = Configuration(), clock: ContinuousClock = ContinuousClock()
    ) {
        self.store = store
        self.broker = broker
        self.metrics = metrics
        self.logger = logger
        self.configuration = configuration
        self.clock = clock
    }

    /// Called after each commit. Any thread; never blocks.
    public func notify() { wake.signal() }

    /// Called after each commit of this process with its events. Any thread; never blocks.
    public func committed(_ events: [StoredEvent]) {
        handed.withLock { $0.append(contentsOf: events) }
        wake.signal()
    }

    /// Relays until the task is cancelled.
    public func run() async {
        var cursor = await initialCursor()
        var persisted = cursor
        var persistedAt = clock.now
        var failures = 0
        while !Task.isCancelled {
            do {
                cursor = try await relayAvailable(after: cursor)
                failures = 0
                // The cursor is saved at most every `persistInterval`: under load that keeps the
                // relay's own writes off the writer; after a crash a few events go out twice,
                // which the hub drops by id.
                if cursor != persisted, clock.now - persistedAt >= configuration.persistInterval {
                    try await store.write { [cursor] tx in try tx.markRelayed(through: cursor) }
                    persisted = cursor
                    persistedAt = clock.now
                }
                await wake.wait(timeout: cursor != persisted ? configuration.persistInterval : configuration.pollInterval, clock: clock)
            } catch {
                failures += 1
                metrics.relayFailed()
                logger.warning("relay failed; events stay in the outbox", ["error": "\(error)", "attempt": "\(failures)"])
                try? await clock.sleep(for: backoff(failures))
            }
        }
        if cursor != persisted { _ = try? await store.write { [cursor] tx in try tx.markRelayed(through: cursor) } }
    }

    /// Publishes every committed event after `cursor`, batch by batch; returns the new cursor.
    private func relayAvailable(after cursor: EventID) async throws -> EventID {
        var cursor = cursor
        let handedOver = handed.withLock { events in
            defer { events.removeAll() }
            return events.filter { $0.id > cursor }.sorted { $0.id < $1.id }
        }
        if !handedOver.isEmpty, Self.continues(cursor, handedOver) {
            try await publishBounded(handedOver)
            metrics.eventsRelayed(handedOver.count)
            return handedOver.last!.id
        }
        while !Task.isCancelled {
            let after = cursor, limit = configuration.batchSize
            let events = try await store.read { tx in try tx.events(after: after, limit: limit) }
            guard let last = events.last else { break }
            try await publishBounded(events)
            metrics.eventsRelayed(events.count)
            cursor = last.id
            if events.count < limit { break }
        }
        return cursor
    }

    /// `broker.publish`, abandoned after `publishTimeout` so a stalled broker cannot hold the relay.
    /// A publish that finishes after its timeout may deliver twice; the hub drops ids it already sent.
    private func publishBounded(_ events: [StoredEvent]) async throws {
        let broker = self.broker, timeout = configuration.publishTimeout, clock = self.clock
        let outcome = Mutex<CheckedContinuation<Void, any Error>?>(nil)
        let timer = Mutex<Task<Void, Never>?>(nil)
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            outcome.withLock { $0 = continuation }
            let finish: @Sendable (Result<Void, any Error>) -> Void = { result in
                outcome.withLock { $0.take() }?.resume(with: result)
            }
            let publishing = Task { finish(await Result { try await broker.publish(events) }) }
            timer.withLock {
                $0 = Task {
                    guard (try? await clock.sleep(for: timeout)) != nil else { return }  // cancelled: published in time
                    publishing.cancel()
                    finish(.failure(BrokerError("publish timed out")))
                }
            }
        }
        timer.withLock { $0?.cancel() }
    }

    /// Whether `events` (sorted) are exactly the ids after `cursor`, with no gap.
    public static func continues(_ cursor: EventID, _ events: [StoredEvent]) -> Bool {
        var expected = cursor.rawValue + 1
        for event in events {
            guard event.id.rawValue == expected else { return false }
            expected += 1
        }
        return true
    }

    private func initialCursor() async -> EventID {
        while !Task.isCancelled {
            if let cursor = try? await store.read({ tx in try tx.relayedThrough() }) { return cursor }
            try? await clock.sleep(for: .milliseconds(500))
        }
        return .zero
    }

    private func backoff(_ failures: Int) -> Duration {
        let millis = min(100 << min(failures, 10), Int(configuration.maxBackoff.components.seconds * 1000))
        return .milliseconds(millis)
    }
}

extension Result where Failure == any Error {
    init(_ body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
