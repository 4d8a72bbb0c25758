public import WaybillDomain
import WaybillNetwork

/// Where the hub feed hands events: the hub in the server, a recorder in tests.
public protocol FeedTarget: Sendable {
    /// Events in id order, each once. Any task; never blocks.
    func deliver(_ events: [StoredEvent])
    /// History rewound under live sockets: close them (1012) and continue after `newest`.
    func historyRewound(to newest: EventCursor)
}

extension Hub: FeedTarget {
    /// Encodes each event's frame here, once and off the service thread, then hands the batch over
    /// in one `execute`.
    public func deliver(_ events: [StoredEvent]) {
        guard !events.isEmpty else { return }
        let framed = events.map { ($0, OutboundFrame(utf8Text: EventFrame.utf8($0))) }
        execute { io in self.deliver(framed, io: io) }
    }

    public func historyRewound(to newest: EventCursor) {
        executeSurely { io in self.rewound(to: newest, io: io) }
    }
}
