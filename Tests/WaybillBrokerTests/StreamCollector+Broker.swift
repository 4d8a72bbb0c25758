import WaybillBroker
import WaybillDomain
import WaybillTesting

typealias DeliveryCollector = StreamCollector<BrokerDelivery>

extension StreamCollector<BrokerDelivery> {
    var deliveries: [BrokerDelivery] { elements }

    var batches: [[StoredEvent]] {
        elements.compactMap { delivery in
            if case .events(let batch) = delivery { return batch }
            return nil
        }
    }

    /// Every event received, in order, across batches.
    var events: [StoredEvent] { batches.flatMap { $0 } }

    func waitForEvents(_ count: Int, timeout: Duration = .seconds(20)) async -> Bool {
        await wait(timeout: timeout) { _ in events.count >= count }
    }

    /// What arrived, in order, for a failure's message: `subscribed, events(2000), lost, …`.
    var summary: String {
        elements.map { delivery in
            switch delivery {
            case .subscribed: "subscribed"
            case .events(let batch): "events(\(batch.count))"
            case .lost: "lost"
            case .skipped: "skipped"
            }
        }.joined(separator: ", ")
    }

    /// Waits until `.subscribed` has arrived `count` times.
    func waitForSubscribed(count: Int = 1, timeout: Duration = .seconds(20)) async -> Bool {
        await wait(timeout: timeout) { $0.filter { $0 == .subscribed }.count >= count }
    }
}
