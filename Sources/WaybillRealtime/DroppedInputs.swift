import Synchronization
import WaybillBroker

/// What the hub feed's forwarders tell its loop about inputs dropped from its bounded queue: that
/// some were, and whether the broker was subscribed or lost at the last word the forwarder saw
/// (the dropped input may have been that very `.lost` or `.subscribed`).
final class DroppedInputs: Sendable {
    private struct State {
        /// Until the broker's first word the feed polls (it may never come: Redis down at startup),
        /// so a drop before it must not be taken for `.subscribed`.
        var broker = BrokerDelivery.lost
        var hasDropped = false
        /// The dropped input was the feed's wake-up for a read owed (`HubFeed`'s `.readOwed`).
        var wakeUpDropped = false
        /// A dropped input was the broker's `.lost`: the loop never heard of the outage.
        var lostDropped = false
    }
    private let state = Mutex(State())

    /// The forwarder saw `.subscribed` or `.lost`.
    func brokerIs(_ delivery: BrokerDelivery) { state.withLock { $0.broker = delivery } }

    func noteDrop() { state.withLock { $0.hasDropped = true } }

    func noteWakeUpDropped() { state.withLock { $0.wakeUpDropped = true } }

    func noteLostDropped() { state.withLock { $0.lostDropped = true } }

    /// Whether a `.lost` was dropped since the last call (then clears).
    func takeLostDropped() -> Bool { take(\.lostDropped) }

    /// Whether a wake-up was dropped since the last call (then clears).
    func takeWakeUpDropped() -> Bool { take(\.wakeUpDropped) }

    private func take(_ flag: WritableKeyPath<State, Bool>) -> Bool {
        state.withLock { s in
            defer { s[keyPath: flag] = false }
            return s[keyPath: flag]
        }
    }

    /// The broker's state if anything was dropped since the last call (then clears), else nil.
    func take() -> BrokerDelivery? {
        state.withLock { s in
            defer { s.hasDropped = false }
            return s.hasDropped ? s.broker : nil
        }
    }
}
