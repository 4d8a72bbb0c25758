internal import Foundation

/// Something the app shows changed. ``DriverSession/updates()`` delivers these in order.
///
/// `Encodable` as one flat JSON object per update (`{"type":"orders","orders":[…]}`), so a terminal
/// client can print them as JSON lines.
public enum SessionUpdate: Hashable, Sendable, Encodable {
    /// The order list was (re)fetched and changed (a 304 sends nothing).
    case orders([OrderSummary])
    /// An opened detail was fetched.
    case detail(OrderDetail)
    /// An opened detail is gone (deleted, unassigned, or 404).
    case detailRemoved(OrderID)
    /// The connection state changed.
    case connection(ConnectionState)
    /// A background fetch failed; the data shown is kept and retried by the next poll or event.
    case failure(WaybillClientError)
    /// A queued driver action was queued, is being sent, was applied or was refused (see ``QueuedAction/state``).
    case action(QueuedAction)

    private enum CodingKeys: String, CodingKey {
        case type, orders, order, id, state, attempt, reason, error, status, message
        case delayMs = "delay_ms"
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .orders(let rows):
            try c.encode("orders", forKey: .type)
            try c.encode(rows, forKey: .orders)
        case .detail(let detail):
            try c.encode("detail", forKey: .type)
            try c.encode(detail, forKey: .order)
        case .detailRemoved(let id):
            try c.encode("detail_removed", forKey: .type)
            try c.encode(id, forKey: .id)
        case .connection(let state):
            try c.encode("connection", forKey: .type)
            switch state {
            case .connecting(let attempt):
                try c.encode("connecting", forKey: .state)
                try c.encode(attempt, forKey: .attempt)
            case .live:
                try c.encode("live", forKey: .state)
            case .backingOff(let attempt, let delay):
                try c.encode("backing_off", forKey: .state)
                try c.encode(attempt, forKey: .attempt)
                try c.encode(delay.nanoseconds / 1_000_000, forKey: .delayMs)
            case .pollingOnly:
                try c.encode("polling_only", forKey: .state)
            case .stopped(let reason):
                try c.encode("stopped", forKey: .state)
                try c.encode(String(describing: reason), forKey: .reason)
            }
        case .failure(let error):
            try c.encode("failure", forKey: .type)
            try c.encodeIfPresent(error.status, forKey: .status)
            try c.encodeIfPresent(error.code, forKey: .error)
            try c.encode(error.description, forKey: .message)
        case .action(let queued):
            // `{"type":"action","id":…,"state":…}` plus the action's own fields (`action`, `order`, …).
            try queued.action.encode(to: encoder)
            try c.encode("action", forKey: .type)
            try c.encode(queued.id, forKey: .id)
            switch queued.state {
            case .waiting: try c.encode("waiting", forKey: .state)
            case .sending: try c.encode("sending", forKey: .state)
            case .applied: try c.encode("applied", forKey: .state)
            case .refused(let refusal):
                try c.encode("refused", forKey: .state)
                var reason = c.nestedContainer(keyedBy: CodingKeys.self, forKey: .reason)
                try reason.encodeIfPresent(refusal.status, forKey: .status)
                try reason.encode(refusal.code, forKey: .error)
                try reason.encode(refusal.message, forKey: .message)
            }
        }
    }

    /// This update as one line of JSON (snake_case keys, ISO 8601 dates).
    public var jsonLine: String {
        guard let data = try? WireJSON.encoder().encode(self) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension DriverSession {
    /// A stream of every change to what the app shows, starting with the current state.
    ///
    /// The first elements describe the present (connection state, the list if loaded, opened details), so a
    /// view that subscribes late is complete at once. Each call returns an independent stream; it ends when
    /// the consumer stops iterating.
    public func updates() -> AsyncStream<SessionUpdate> {
        let (stream, continuation) = AsyncStream.makeStream(of: SessionUpdate.self)
        let id = nextSubscriberID
        nextSubscriberID += 1
        subscribers[id] = continuation
        continuation.yield(.connection(machine.state))
        if hasLoadedOrders { continuation.yield(.orders(orders)) }
        for id in details.keys.sorted() { if let cached = details[id] { continuation.yield(.detail(cached.detail)) } }
        for action in refused + actionQueue.actions { continuation.yield(.action(action)) }
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(id) }
        }
        return stream
    }

    private func unsubscribe(_ id: Int) { subscribers[id] = nil }

    func publish(_ update: SessionUpdate) {
        for continuation in subscribers.values { continuation.yield(update) }
    }
}
