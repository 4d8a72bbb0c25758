public import Foundation

/// What a write did to an order: the input of the broadcaster.
public enum OrderChange: Sendable, Equatable {
    case created(Order)
    /// Title, notes, stages or documents changed.
    case updated(before: Order, after: Order)
    case statusChanged(before: Order, after: Order)
    /// Assigned or reassigned.
    case assigned(before: Order, after: Order)
    case unassigned(before: Order, after: Order)
    case deleted(Order)
    /// The assigned driver's device reported showing a version: the order as it is now, with its
    /// new `seen` (not a change of the order itself: its version stays).
    case seen(OrderSummary, company: CompanyID)
}

/// The one place that decides which events an order write emits and who receives them (SPEC §3).
///
/// Pure: the caller appends the result to the outbox in the same transaction as the write.
public enum Broadcaster {
    /// The events for `change`, in the order they must be committed.
    public static func events(for change: OrderChange, at now: Date) -> [OrderEvent] {
        switch change {
        case .created(let order):
            return [event(.created, order, oldStatus: nil, to: groups(order, driver: order.driverID), now)]
        case .updated(_, let after):
            return [event(.updated, after, oldStatus: after.status, to: groups(after, driver: after.driverID), now)]
        case .statusChanged(let before, let after):
            return [
                event(.statusChanged, after, oldStatus: before.status, to: groups(after, driver: after.driverID), now)
            ]
        case .assigned(let before, let after):
            return assignmentEvents(before: before, after: after, now)
        case .unassigned(let before, let after):
            var unassigned = event(.unassigned, after, oldStatus: before.status, to: groups(after, driver: before.driverID), now)
            unassigned.oldDriverID = before.driverID
            return [unassigned]
        case .deleted(let order):
            return [event(.deleted, order, oldStatus: order.status, to: groups(order, driver: order.driverID), now)]
        case .seen(let summary, let company):
            return seenEvents(summary, company)
        }
    }

    /// `order_seen` goes to the panel and the fleet only (SPEC §3): a driver learns nothing from
    /// another device's receipt, and its own device already knows what it shows. Its time is the
    /// receipt's, so the frame and the REST `seen.at` agree.
    private static func seenEvents(_ summary: OrderSummary, _ company: CompanyID) -> [OrderEvent] {
        guard let receipt = summary.seen else { return [] }
        return [
            OrderEvent(
                type: .seen, companyID: company, orderID: summary.id, number: summary.number,
                oldStatus: summary.status, newStatus: summary.status, driverID: receipt.driverID,
                changedAt: receipt.at, groups: [.company(company), .fleet(company)], seenVersion: receipt.version)
        ]
    }

    /// Reassignment A → B: the panel and the fleet get `order_assigned` naming both drivers; B gets
    /// its own `order_assigned` and A its own `order_unassigned`, each naming nobody else (SPEC §3:
    /// a frame sent to a driver carries nothing about other drivers). Separate events rather than
    /// per-recipient frames: every frame is encoded once and all events of a write stay in one
    /// transaction, so ids stay dense and the outbox keeps one order.
    private static func assignmentEvents(before: Order, after: Order, _ now: Date) -> [OrderEvent] {
        guard let previous = before.driverID, previous != after.driverID else {
            var assigned = event(.assigned, after, oldStatus: before.status, to: groups(after, driver: after.driverID), now)
            assigned.oldDriverID = before.driverID
            return [assigned]
        }
        var panel = event(.assigned, after, oldStatus: before.status, to: groups(after, driver: nil), now)
        panel.oldDriverID = previous
        var events = [panel]
        if let next = after.driverID {
            events.append(event(.assigned, after, oldStatus: before.status, to: [.driver(next)], now))
        }
        var unassigned = event(.unassigned, after, oldStatus: before.status, to: [.driver(previous)], now)
        unassigned.driverID = nil
        unassigned.oldDriverID = previous
        events.append(unassigned)
        return events
    }

    private static func groups(_ order: Order, driver: UserID?) -> [Group] {
        // Each list as one literal of its size: a two-group array grown by an append was made twice.
        guard let driver else { return [.company(order.companyID), .fleet(order.companyID)] }
        return [.company(order.companyID), .fleet(order.companyID), .driver(driver)]
    }

    private static func event(
        _ type: OrderEventType, _ order: Order, oldStatus: OrderStatus?, to groups: [Group], _ now: Date
    ) -> OrderEvent {
        OrderEvent(
            type: type, companyID: order.companyID, orderID: order.id ?? OrderID(0), number: order.number,
            oldStatus: oldStatus, newStatus: order.status, driverID: order.driverID, changedAt: now, groups: groups)
    }
}
