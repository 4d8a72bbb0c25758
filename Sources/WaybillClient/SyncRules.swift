/// Work the session owes the app after some events: which lists and details to refetch.
///
/// A value that merges, so a burst of events becomes one piece of work (see ``Coalescer``).
struct SyncWork: Hashable, Sendable {
    /// The order list must be refetched (bump the list revision).
    var refreshesList = false
    /// Every cached detail must be refetched too (after `reset`).
    var refreshesAllDetails = false
    /// Cached details to refetch.
    var details: Set<OrderID> = []
    /// Cached details to drop at once (the order was deleted).
    var evictions: Set<OrderID> = []

    static let list = SyncWork(refreshesList: true)
    static let everything = SyncWork(refreshesList: true, refreshesAllDetails: true)

    var isEmpty: Bool { !refreshesList && !refreshesAllDetails && details.isEmpty && evictions.isEmpty }

    /// Adds `later` to this work; a later eviction cancels an earlier refetch of the same order.
    mutating func merge(_ later: SyncWork) {
        refreshesList = refreshesList || later.refreshesList
        refreshesAllDetails = refreshesAllDetails || later.refreshesAllDetails
        details.subtract(later.evictions)
        details.formUnion(later.details)
        evictions.formUnion(later.evictions)
    }
}

/// The client's sync rules (SPEC §5.2): an event is a signal, state comes from the REST API.
enum SyncRules {
    /// What one order event costs: the list always; the detail only if the driver has it open (cached), and
    /// a deleted order's detail is dropped instead of refetched (a refetch could only 404).
    static func work(for event: OrderEventFrame, cached: Set<OrderID>) -> SyncWork {
        var work = SyncWork.list
        guard cached.contains(event.orderID) else { return work }
        if event.kind == .deleted {
            work.evictions.insert(event.orderID)
        } else {
            work.details.insert(event.orderID)
        }
        return work
    }
}
