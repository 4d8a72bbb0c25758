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
    //
    // Each use case checks what it can before the store and returns its write (`OrderWrite`): the
    // order it changes and its transaction's work. `run` commits it; `runNow` commits it on the
    // calling thread when the store can do that without waiting (a request answered without a
    // task, `APIResponder.respondNow`). Both go through the same transaction (`transaction`).

    func create(_ request: CreateOrderRequest, by actor: Actor) throws -> OrderWrite {
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
        return OrderWrite(changing: nil) { tx, now in
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

    func patch(_ id: OrderID, _ request: PatchOrderRequest, by actor: Actor, ifMatch: OrderPrecondition = .none) -> OrderWrite {
        // The body is judged after the role, the order's visibility and `If-Match` (DESIGN.md, "Lost
        // updates"): a stale client gets 412, an unknown order 404, whatever the body says.
        mutation(id, by: actor, ifMatch: ifMatch) { order, _, now in
            guard actor.isDispatcher else { throw OrderRuleViolation.roleNotAllowed(actor.role) }
            let patch = OrderPatch(
                title: try request.title.map(Validation.title), notes: try request.notes.map(Validation.notes),
                stages: try request.stages.map(Validation.stages))
            return (try order.patched(patch, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    /// `POST /status`. `new` is unassigning (SPEC §1's table: `assigned → new` by a dispatcher),
    /// with its events; `assigned` needs a driver, so only `/assign` reaches it (409 here).
    func changeStatus(_ id: OrderID, to status: OrderStatus, by actor: Actor, ifMatch: OrderPrecondition = .none) -> OrderWrite {
        if status == .new { return unassign(id, by: actor, ifMatch: ifMatch) }
        return mutation(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.transitioned(to: status, by: actor, at: now), { .statusChanged(before: $0, after: $1) })
        }
    }

    func assign(_ id: OrderID, to driver: UserID, by actor: Actor, ifMatch: OrderPrecondition = .none) throws -> OrderWrite {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
        return mutation(id, by: actor, ifMatch: ifMatch) { order, tx, now in
            try Self.requireDriver(driver, of: actor, in: tx)
            return (try order.assigning(driver, by: actor, at: now), { .assigned(before: $0, after: $1) })
        }
    }

    func unassign(_ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none) -> OrderWrite {
        mutation(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.unassigning(by: actor, at: now), { .unassigned(before: $0, after: $1) })
        }
    }

    func completeStage(_ id: OrderID, stage: StageID, by actor: Actor, ifMatch: OrderPrecondition = .none) -> OrderWrite {
        mutation(id, by: actor, ifMatch: ifMatch) { order, _, now in
            (try order.completingStage(stage, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    func attach(_ request: DocumentRequest, to id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none) -> OrderWrite {
        mutation(id, by: actor, ifMatch: ifMatch) { order, _, now in
            let document = try Validation.document(request, at: now)  // after 404 and 412, as in `patch`
            return (try order.attaching(document, by: actor, at: now), { .updated(before: $0, after: $1) })
        }
    }

    /// Runs to the order as it was before it was deleted.
    func delete(_ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition = .none) throws -> OrderWrite {
        guard actor.isDispatcher else { throw APIError.dispatcherOnly }
        return OrderWrite(changing: (id, actor.companyID)) { tx, _ in
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
    private func mutation(_ id: OrderID, by actor: Actor, ifMatch: OrderPrecondition, _ rule: @escaping Rule) -> OrderWrite {
        OrderWrite(changing: (id, actor.companyID)) { tx, now in
            let current = try Self.visibleOrder(id, for: actor, in: tx)
            try ifMatch.check(current)
            let (next, change) = try rule(current, tx, now)
            guard let next else { return (current, nil) }
            let saved = try tx.updateOrder(next)
            return (saved, change(current, saved))
        }
    }

    /// Runs `write` in one transaction, appends the broadcaster's events for its change, commits,
    /// then reports the committed events. A write that changes one existing order of the caller's
    /// company (`OrderWrite.changing`) may be run one at a time per order by the store
    /// (`OrderStore.write(changing:in:appendingEvents:)`).
    func run(_ write: OrderWrite) async throws -> Order {
        // Work the request adds to its order write's transaction, after the change and before its
        // events: `IdempotentWrite` stores the request's response there, so the change and the
        // response commit together. Read here, before the write starts, because the transaction
        // runs on the store's thread. Must have no effect outside the store (PostgreSQL may run a
        // transaction twice).
        let transaction = Self.transaction(write, now: clock.now(), hook: IdempotentWrite.current?.inTransaction)
        let (order, events) =
            if let order = write.changing {
                try await store.write(changing: order.id, in: order.company, appendingEvents: transaction)
            } else {
                try await store.write(appendingEvents: transaction)
            }
        if !events.isEmpty { committed(events) }
        return order
    }

    /// `run`, committed on the calling thread before it returns, when the store can do that without
    /// waiting (`OrderStore.writeNow`: SQLite, with its writer idle and this thread running its
    /// work); `nil`, with nothing run, otherwise: then `run` it. Not under an `Idempotency-Key`,
    /// whose stored answer joins the transaction through the request's task (`nil` then too).
    func runNow(_ write: OrderWrite) throws -> Order? {
        guard IdempotentWrite.current == nil else { return nil }
        let transaction = Self.transaction(write, now: clock.now(), hook: nil)
        guard let (order, events) = try store.writeNow(appendingEvents: transaction) else { return nil }
        if !events.isEmpty { committed(events) }
        return order
    }

    /// The transaction of `write` at `now`: its work, then `hook`, then its events, appended as the
    /// last step before commit (ids are taken in commit order: docs/DESIGN.md, "Event ids").
    private static func transaction(
        _ write: OrderWrite, now: Date, hook: (@Sendable (Order, any StoreWriter, Date) throws -> Void)?
    ) -> @Sendable (any StoreWriter) throws -> (Order, [OrderEvent]) {
        let body = write.body
        return { tx in
            let (order, change) = try body(tx, now)
            try hook?(order, tx, now)
            return (order, change.map { Broadcaster.events(for: $0, at: now) } ?? [])
        }
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

/// One order write, checked as far as it can be before the store and ready to run
/// (`OrderService.run`, `runNow`): the one existing order of the caller's company it changes, if
/// any, and its transaction's work, which returns the saved order and its change (`nil`: nothing
/// changed, no event).
struct OrderWrite: Sendable {
    let changing: (id: OrderID, company: CompanyID)?
    let body: @Sendable (any StoreWriter, Date) throws -> (Order, OrderChange?)
}
