import Foundation
import WaybillDomain
import WaybillStorage

/// The order use cases: request → domain rule → store (order + outbox in one transaction) → relay.
///
/// Every order write goes through `commit`, which asks the `Broadcaster` for the events and appends
/// them in the same transaction; after commit the relay is poked. No other code emits order events.
final class OrderService: Sendable {
    private let store: any OrderStore
    private let clock: any WallClock
    private let committed: @Sendable ([StoredEvent]) -> Void

    /// - Parameter committed: called after each commit with its events (pokes the relay; never blocks).
    init(store: any OrderStore, clock: any WallClock, committed: @escaping @Sendable ([StoredEvent]) -> Void) {
        self.store = store
        self.clock = clock
        self.committed = committed
    }

    // MARK: Reads

    /// One page of the list. A driver's query is always narrowed to their own orders, whatever
    /// it asked for (also through `ids`): isolation does not depend on the route's parsing.
    func list(for actor: Actor, _ query: OrderQuery) async throws -> OrderPage {
        var scoped = query
        if !actor.isDispatcher {
            // Another driver's orders: none visible (not silently this driver's own instead).
            if let asked = query.driver, asked != actor.userID { return .empty }
            scoped.driver = actor.userID
        }
        return try await store.read { [scoped] tx in try tx.orderPage(in: actor.companyID, scoped) }
    }

    /// Orders per status, for the panel's counters (a driver's: their own).
    func counts(for actor: Actor) async throws -> [OrderStatus: Int] {
        try await store.read { tx in
            try tx.orderCounts(in: actor.companyID, driver: actor.isDispatcher ? nil : actor.userID)
        }
    }

    func detail(_ id: OrderID, for actor: Actor) async throws -> Order {
        try await store.read { tx in try Self.visibleOrder(id, for: actor, in: tx) }
    }

    func drivers(for actor: Actor) async throws -> [User] {
        try await store.read { tx in try tx.drivers(in: actor.companyID) }
    }

    // MARK: Writes

    func create(_ request: CreateOrderRequest, by actor: Actor) async throws -> Order {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
        let title = try Validation.title(request.title)
        let notes = try Validation.notes(request.notes ?? "")
        // A new order has no existing stages to keep: ids in the body are dropped before the rules
        // see them (ids repeated there were refused with 422, for ids never used; a review, 2026-12-07).
        let stages = try Validation.stages((request.stages ?? []).map { stage in
            var fresh = stage
            fresh.id = nil
            return fresh
        })
        let driver = request.driverID.map(UserID.init)
        return try await commit { tx, now in
            if let driver { try Self.requireDriver(driver, of: actor, in: tx) }
            let period = OrderNumber.period(of: now)
            let sequence = try tx.nextOrderSequence(company: actor.companyID, year: period.year, month: period.month)
            let order = Order(
                companyID: actor.companyID, number: OrderNumber.format(year: period.year, month: period.month, sequence: sequence),
                status: driver == nil ? .new : .assigned, driverID: driver, title: title, notes: notes, stages: stages,
                createdAt: now, updatedAt: now)
            let saved = try tx.insertOrder(order)
            return (saved, .created(saved))
        }
    }

    // Every write to an existing order takes `ifMatch` (the request's `If-Match`), checked in the
    // write transaction after the order is read and before any rule: see `OrderPrecondition`.

    func patch(
        _ id: OrderID, _ request: PatchOrderRequest, by actor: Actor, ifMatch: OrderPrecondition = .none
    ) async throws -> Order {
        // The body is judged after the role, the order's visibility and `If-Match` (DESIGN.md, "Lost
        // updates"): a stale client gets 412, an unknown order 404, whatever the body says.
        try await mutate(id, by: actor, ifMatch: ifMatch) { order, _, now in
            guard actor.isDispatcher else { throw OrderRuleViolation.roleNotAllowed(actor.role) }
            let patch = OrderPatch(
                title: try request.title.map(Validation.title), notes: try request.notes.map(Validation.notes),
                stages: try request.stages.map(Validation.stages))
            return (try order.patched(patch, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    /// `POST /status`. `new` is unassigning (SPEC §1's table: `assigned → new` by a dispatcher),
    /// with its events; `assigned` needs a driver, so only `/assign` reaches it (409 here).
    func changeStatus(
        _ id: OrderID, to status: OrderStatus, by actor: Actor, ifMatch: OrderPrecondition = .none
    ) async throws -> Order {
        if status == .new { return try await unassign(id, by: actor, ifMatch: ifMatch) }
        return try await mutate(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.transitioned(to: status, by: actor, at: now), { .statusChanged(before: $0, after: $1) })
        }
    }

    func assign(
        _ id: OrderID, to driver: UserID, by actor: Actor, ifMatch: OrderPrecondition = .none
    ) async throws -> Order {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
        return try await mutate(id, by: actor, ifMatch: ifMatch) { order, tx, now in
            try Self.requireDriver(driver, of: actor, in: tx)
            return (try order.assigning(driver, by: actor, at: now), { .assigned(before: $0, after: $1) })
        }
    }

    func unassign(_ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none) async throws -> Order {
        try await mutate(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.unassigning(by: actor, at: now), { .unassigned(before: $0, after: $1) })
        }
    }

    func completeStage(
        _ id: OrderID, stage: StageID, by actor: Actor, ifMatch: OrderPrecondition = .none
    ) async throws -> Order {
        try await mutate(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.completingStage(stage, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    func attach(
        _ request: DocumentRequest, to id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none
    ) async throws -> Order {
        try await mutate(id, by: actor, ifMatch: ifMatch) { order, _, now in
            let document = try Validation.document(request, at: now)  // after 404 and 412, as in `patch`
            return (try order.attaching(document, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    /// - Returns: the order as it was before it was deleted.
    @discardableResult
    func delete(_ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none) async throws -> Order {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
        return try await commit(changing: (id, actor.companyID)) { tx, _ in
            let order = try Self.visibleOrder(id, for: actor, in: tx)
            try ifMatch.check(order)
            try order.checkDeletable(by: actor)
            try tx.deleteOrder(id, in: actor.companyID)
            return (order, .deleted(order))
        }
    }

    // MARK: The one write path

    typealias Rule = @Sendable (Order, any StoreWriter, Date) throws -> (Order?, @Sendable (Order, Order) -> OrderChange)

    /// Loads a visible order, checks `ifMatch` against it, applies `rule`, saves the result and its
    /// events. A `nil` order from the rule means "nothing changes": no save, no event, the current
    /// order is returned.
    ///
    /// The precondition is checked here, in the same transaction as the save, so it cannot pass
    /// for a version that another write replaces before this one commits.
    private func mutate(
        _ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition, _ rule: @escaping Rule
    ) async throws -> Order {
        try await commit(changing: (id, actor.companyID)) { tx, now in
            let current = try Self.visibleOrder(id, for: actor, in: tx)
            try ifMatch.check(current)
            let (next, change) = try rule(current, tx, now)
            guard let next else { return (current, nil) }
            let saved = try tx.updateOrder(next)
            return (saved, change(current, saved))
        }
    }

    /// Runs `body` in one transaction, appends the broadcaster's events for its change, commits,
    /// then reports the committed events. `changing`: the one existing order it changes, of the
    /// caller's company, whose writes the store may run one at a time
    /// (`OrderStore.write(changing:in:appendingEvents:)`).
    private func commit(
        changing order: (id: OrderID, company: CompanyID)? = nil, _ body: @escaping @Sendable (any StoreWriter, Date) throws -> (Order, OrderChange?)
    ) async throws -> Order {
        // Work the request adds to its order write's transaction, after the change and before its
        // events: `IdempotentWrite` stores the request's response there, so the change and the
        // response commit together. Read here, before the write starts, because the transaction
        // runs on the store's thread. Must have no effect outside the store (PostgreSQL may run a
        // transaction twice).
        let now = clock.now(), hook = IdempotentWrite.current?.inTransaction
        // The events are appended as the last step before commit: ids are taken in commit order
        // (docs/DESIGN.md, "Event ids").
        let transaction: @Sendable (any StoreWriter) throws -> (Order, [OrderEvent]) = { tx in
            let (order, change) = try body(tx, now)
            try hook?(order, tx, now)
            return (order, change.map { Broadcaster.events(for: $0, at: now) } ?? [])
        }
        let (order, events) =
            if let order { try await store.write(changing: order.id, in: order.company, appendingEvents: transaction) }
            else { try await store.write(appendingEvents: transaction) }
        if !events.isEmpty { committed(events) }
        return order
    }

    private static func visibleOrder(_ id: OrderID, for actor: Actor, in tx: any StoreReader) throws -> Order {
        guard let order = try tx.order(id, in: actor.companyID), actor.canSee(order) else { throw StoreError.notFound }
        return order
    }

    private static func requireDriver(_ id: UserID, of actor: Actor, in tx: any StoreReader) throws {
        guard let user = try tx.user(id), user.companyID == actor.companyID, user.role == .driver else {
            throw ValidationError(field: "driver_id", problem: "is not a driver of your company")
        }
    }
}
