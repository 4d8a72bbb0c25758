public import WaybillBroker
import WaybillDomain
import WaybillNetwork
public import WaybillObservability

/// Moves events from a broker subscription to the hub: frames are encoded here, once per event and
/// off the service thread, then handed over in one `execute` per batch.
public final class HubFeed: Sendable {
    private let broker: any Broker
    private let hub: Hub
    private let logger: Logger

    public init(broker: any Broker, hub: Hub, logger: Logger) {
        self.broker = broker
        self.hub = hub
        self.logger = logger
    }

    /// Feeds until cancelled. When a subscription ends (broker lost), every socket is closed with
    /// 1012 so clients resume from the outbox, and a new subscription starts.
    public func run(first subscription: AsyncStream<BrokerDelivery>) async {
        let hub = self.hub
        var subscription = subscription
        var pause = Duration.milliseconds(100)
        while !Task.isCancelled {
            var delivered = false
            deliveries: for await delivery in subscription {
                switch delivery {
                case .subscribed: continue
                case .lost: break deliveries
                case .events(let batch):
                    delivered = true
                    let framed = batch.map { ($0, OutboundFrame(text: EventFrame.json($0))) }
                    hub.execute { io in hub.deliver(framed, io: io) }
                }
            }
            guard !Task.isCancelled else { return }
            logger.warning("broker subscription lost; closing sockets so clients resume")
            // Subscribe first: a client that reconnects after the close must not miss a live event.
            subscription = broker.subscribe()
            hub.execute { io in hub.closeAll(code: 1012, reason: "service restart", io: io) }
            pause = delivered ? .milliseconds(100) : min(pause * 2, .seconds(5))
            try? await Task.sleep(for: pause)  // a broker that keeps failing must not spin
        }
    }
}
