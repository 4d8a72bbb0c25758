public import Foundation

extension OrderStatus {
    /// Whether no further status change is possible.
    public var isFinal: Bool { self == .completed || self == .cancelled }

    /// The moves `POST /status` may make (assign/unassign own `new ⇄ assigned`).
    static let forwardMoves: [OrderStatus: OrderStatus] = [
        .assigned: .accepted, .accepted: .inProgress, .inProgress: .completed,
    ]
}

extension Order {
    /// The order after `actor` moved it to `target` through `POST /status` (SPEC §1).
    ///
    /// `new ⇄ assigned` is not reachable here: it belongs to `assigning(_:by:at:)` and `unassigning(by:at:)`.
    /// - Throws: `OrderRuleViolation`.
    public func transitioned(
        to target: OrderStatus, by actor: Actor, at now: Date
    ) throws(OrderRuleViolation) -> Order {
        if target == .cancelled {
            guard actor.isDispatcher else { throw .roleNotAllowed(actor.role) }
            guard !status.isFinal else { throw .invalidTransition(from: status, to: target) }
        } else {
            try requireDispatcherOrAssignedDriver(actor)
            guard OrderStatus.forwardMoves[status] == target else {
                throw .invalidTransition(from: status, to: target)
            }
        }
        var next = self
        next.status = target
        return next.touched(at: now)
    }

    /// The order assigned to `driver` (new → assigned, or a reassignment while still assigned).
    ///
    /// Returns `nil` when the order already belongs to that driver: nothing changes, no event.
    public func assigning(_ driver: UserID, by actor: Actor, at now: Date) throws(OrderRuleViolation) -> Order? {
        guard actor.isDispatcher else { throw .roleNotAllowed(actor.role) }
        guard status == .new || status == .assigned else { throw .invalidTransition(from: status, to: .assigned) }
        if driverID == driver && status == .assigned { return nil }
        var next = self
        next.driverID = driver
        next.status = .assigned
        return next.touched(at: now)
    }

    /// The order with its driver removed (assigned → new).
    public func unassigning(by actor: Actor, at now: Date) throws(OrderRuleViolation) -> Order {
        guard actor.isDispatcher else { throw .roleNotAllowed(actor.role) }
        guard status == .assigned else { throw .invalidTransition(from: status, to: .new) }
        var next = self
        next.driverID = nil
        next.status = .new
        return next.touched(at: now)
    }

    /// The order with stage `stageID` marked done by its assigned driver.
    public func completingStage(_ stageID: StageID, by actor: Actor, at now: Date) throws(OrderRuleViolation) -> Order {
        guard actor.role == .driver else { throw .roleNotAllowed(actor.role) }
        guard driverID == actor.userID else { throw .notAssignedDriver }
        guard !status.isFinal else { throw .orderClosed(status) }
        guard let index = stages.firstIndex(where: { $0.id == stageID }) else { throw .stageNotFound(stageID) }
        guard stages[index].completedAt == nil else { throw .stageAlreadyCompleted(stageID) }
        var next = self
        next.stages[index].completedAt = now
        return next.touched(at: now)
    }

    /// Most documents one order holds. Every change to an order reads all of them in its write
    /// transaction, and `GET` returns them all: without a bound, one order repeatedly attached to
    /// would slow every write of the store's single writer (docs/DESIGN.md, "Order rules").
    public static let maxDocuments = 100

    /// The order with a document's metadata attached, by its assigned driver or a dispatcher.
    ///
    /// A completed order still takes documents (a signed delivery note comes after the last
    /// stage); a cancelled one does not (SPEC §5.8: the driver's queued action is refused).
    public func attaching(_ document: Document, by actor: Actor, at now: Date) throws(OrderRuleViolation) -> Order {
        try requireDispatcherOrAssignedDriver(actor)
        guard status != .cancelled else { throw .orderClosed(status) }
        guard documents.count < Self.maxDocuments else { throw .tooManyDocuments }
        var next = self
        next.documents.append(document)
        return next.touched(at: now)
    }

    /// The order with the dispatcher's edits applied (title, notes, stages).
    ///
    /// Returns `nil` for a patch that names no field (`{}`): no new version and no event, so a
    /// driver's queued action holding the current version is not refused with 412 for it. A patch
    /// that writes a field is an edit even when the value is the same (a write is a write, as a
    /// dispatcher saving the form expects; the benchmark tools count on one event per `PATCH`).
    /// A finished order keeps its stages (they are its delivery record); its title and notes may
    /// still be corrected, and its stages sent back unchanged.
    public func patched(_ patch: OrderPatch, by actor: Actor, at now: Date) throws(OrderRuleViolation) -> Order? {
        guard actor.isDispatcher else { throw .roleNotAllowed(actor.role) }
        if patch.title == nil && patch.notes == nil && patch.stages == nil { return nil }
        var next = self
        if let title = patch.title { next.title = title }
        if let notes = patch.notes { next.notes = notes }
        if let stages = patch.stages {
            let merged = mergedStages(stages)
            if !Self.sameRoute(merged, self.stages) {
                guard !status.isFinal else { throw .orderClosed(status) }
                next.stages = merged
            }
        }
        return next.touched(at: now)
    }

    /// Whether two routes are the same to the millisecond the stores keep (a time parsed from the
    /// request and the same time read back from a store may differ in the last bits of a `Double`).
    static func sameRoute(_ a: [Stage], _ b: [Stage]) -> Bool {
        func ms(_ date: Date?) -> Int64? { date?.epochMilliseconds }
        return a.count == b.count
            && zip(a, b).allSatisfy { x, y in
                x.id == y.id && x.position == y.position && x.kind == y.kind && x.address == y.address
                    && ms(x.plannedAt) == ms(y.plannedAt) && ms(x.completedAt) == ms(y.completedAt)
            }
    }

    /// Whether `actor` may delete the order.
    public func checkDeletable(by actor: Actor) throws(OrderRuleViolation) {
        guard actor.isDispatcher else { throw .roleNotAllowed(actor.role) }
    }

    private func requireDispatcherOrAssignedDriver(_ actor: Actor) throws(OrderRuleViolation) {
        if actor.isDispatcher { return }
        guard driverID == actor.userID else { throw .notAssignedDriver }
    }

    /// Every change bumps `version` and `updatedAt`, and `updatedAt` only moves forward: a write
    /// that read its clock before waiting for the row (a queue, a lock, another node whose clock is
    /// behind) would otherwise stamp version n+1 earlier than version n, and `updated_after=`
    /// would miss an order that changed after the time asked for. One millisecond (the storage's
    /// resolution) past the previous stamp keeps "changed strictly after" true for every version.
    private func touched(at now: Date) -> Order {
        var next = self
        next.version += 1
        next.updatedAt = max(now, updatedAt.addingTimeInterval(0.001))
        return next
    }

    /// New stage list from a patch: a stage that names an existing id keeps its id and completion time.
    private func mergedStages(_ incoming: [Stage]) -> [Stage] {
        incoming.enumerated().map { index, stage in
            var merged = stage
            merged.position = index + 1
            if let id = stage.id, let existing = stages.first(where: { $0.id == id }) {
                merged.completedAt = existing.completedAt
            } else {
                merged.id = nil
                merged.completedAt = nil
            }
            return merged
        }
    }
}

/// A dispatcher's edit of an order: `nil` fields stay as they are.
public struct OrderPatch: Sendable, Equatable {
    public var title: String?
    public var notes: String?
    /// The whole new route; stages not listed are removed.
    public var stages: [Stage]?
    public init(title: String? = nil, notes: String? = nil, stages: [Stage]? = nil) {
        self.title = title
        self.notes = notes
        self.stages = stages
    }
}
