import WaybillBroker
import WaybillDomain

extension FuzzTarget {
    /// A broker message (`BrokerWireFormat.decode`, what every node runs on every batch from
    /// Redis): the whole input is one message.
    ///
    /// Checks, for what it accepts: at most `maxEvents` events, ids positive and ascending, and
    /// written back out (`encode`) it decodes to the same events, cursors included — a batch that
    /// decodes is one a node could have written.
    static let brokerBatch = FuzzTarget(name: "broker-batch", summary: "broker messages between nodes") { input in
        let bytes = input.rest()
        guard let events = try? BrokerWireFormat.decode(bytes) else { return }
        FuzzCheck.expect(events.count <= BrokerWireFormat.maxEvents, "\(events.count) events")
        FuzzCheck.expect(events.allSatisfy { $0.id.rawValue > 0 }, "an id not positive")
        FuzzCheck.expect(zip(events, events.dropFirst()).allSatisfy { $0.id < $1.id }, "ids not ascending")
        let again = try? BrokerWireFormat.decode(BrokerWireFormat.encode(events))
        FuzzCheck.expect(again == events, "no round trip")
        FuzzCheck.expect(again?.map(\.cursor) == events.map(\.cursor), "cursors differ after a round trip")
    }
}
