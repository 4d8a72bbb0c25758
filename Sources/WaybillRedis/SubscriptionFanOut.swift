import Synchronization
import WaybillBroker
import WaybillDomain

/// The live subscriptions of one Redis broker, and whether its subscriber is subscribed right now.
///
/// One subscriber thread feeds every `AsyncStream` here, so N subscriptions cost one Redis
/// connection and one decode per message. A new subscription gets `.subscribed` at once if the
/// thread is subscribed (every batch read after that reaches it), else with everyone else when the
/// thread subscribes again. Continuations are yielded to under the lock so each subscription sees
/// the thread's `.lost`/`.subscribed`/batches in one order; `finish` runs outside it, because it
/// calls `onTermination`, which takes the lock.
final class SubscriptionFanOut: Sendable {
    private struct State {
        var subscriptions: [Int: AsyncStream<BrokerDelivery>.Continuation] = [:]
        var nextID = 0
        var isSubscribed = false
        var isClosed = false
    }

    private let state = Mutex(State())

    /// A new stream, registered; `.subscribed` comes first (now, or after the next subscribe).
    /// After `finishAll` it is a stream that has already ended.
    func makeStream() -> AsyncStream<BrokerDelivery> {
        let (stream, continuation) = AsyncStream.makeStream(of: BrokerDelivery.self, bufferingPolicy: .unbounded)
        let id: Int? = state.withLock { state in
            guard !state.isClosed else { return nil }
            let id = state.nextID
            state.nextID += 1
            state.subscriptions[id] = continuation
            if state.isSubscribed { continuation.yield(.subscribed) }
            return id
        }
        guard let id else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscriptions.removeValue(forKey: id) }
        }
        return stream
    }

    /// How many subscriptions are live (their consumer has not stopped).
    var count: Int { state.withLock { $0.subscriptions.count } }

    /// The subscriber thread is subscribed: every subscription hears `.subscribed`.
    func subscribed() {
        state.withLock { state in
            state.isSubscribed = true
            for continuation in state.subscriptions.values { continuation.yield(.subscribed) }
        }
    }

    /// The connection dropped: every subscription hears `.lost` (once per drop).
    func lost() {
        state.withLock { state in
            guard state.isSubscribed else { return }
            state.isSubscribed = false
            for continuation in state.subscriptions.values { continuation.yield(.lost) }
        }
    }

    /// A batch read from the channel.
    func deliver(_ events: [StoredEvent]) {
        state.withLock { state in
            guard state.isSubscribed else { return }
            for continuation in state.subscriptions.values { continuation.yield(.events(events)) }
        }
    }

    /// A message on the channel could not be read: every subscription hears `.skipped`.
    func skipped() {
        state.withLock { state in
            guard state.isSubscribed else { return }
            for continuation in state.subscriptions.values { continuation.yield(.skipped) }
        }
    }

    /// Ends every stream (the broker closed); later `makeStream` calls return ended streams.
    func finishAll() {
        let ending = state.withLock { state in
            state.isClosed = true
            state.isSubscribed = false
            defer { state.subscriptions = [:] }
            return Array(state.subscriptions.values)
        }
        for continuation in ending { continuation.finish() }
    }
}
