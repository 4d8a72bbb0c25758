#if canImport(Observation)
    public import Observation

    /// The session's state as an `@Observable` object for SwiftUI: bind views to ``orders``,
    /// ``connectionState`` and ``detail(_:)``.
    ///
    /// ```swift
    /// @State private var store = OrdersStore(session: session)
    /// var body: some View {
    ///     List(store.orders) { OrderRow(order: $0) }
    ///         .task { await store.run() }
    /// }
    /// ```
    /// Main-actor isolated: read it from views. It mirrors ``DriverSession/updates()`` while ``run()`` runs.
    @MainActor @Observable
    public final class OrdersStore {
        /// The driver's orders (empty until the first fetch).
        public private(set) var orders: [OrderSummary] = []
        /// The socket's state, for a status line.
        public private(set) var connectionState: ConnectionState = .stopped(.notStarted)
        /// The last background failure, cleared by the next successful list update.
        public private(set) var lastFailure: WaybillClientError?
        /// Queued driver actions not yet applied, oldest first: overlay them on rows and details
        /// ("accepted — waiting for coverage"); ``pendingActions(for:)`` filters one order's.
        public private(set) var pendingActions: [QueuedAction] = []
        /// Actions the server refused (or the queue gave up on), to show the driver once.
        public private(set) var refusedActions: [QueuedAction] = []
        private var details: [OrderID: OrderDetail] = [:]

        /// The pending actions of order `id`.
        public func pendingActions(for id: OrderID) -> [QueuedAction] { pendingActions.filter { $0.orderID == id } }

        /// The session this store mirrors; call its actions
        /// (``DriverSession/changeStatus(of:to:expecting:)``…) directly.
        public let session: DriverSession

        /// A store mirroring `session`. Nothing happens until ``run()``.
        public init(session: DriverSession) { self.session = session }

        /// Starts the session and mirrors its updates until the calling task is cancelled (e.g. `.task {}`).
        ///
        /// Cancelling stops the mirroring, not the session (other views may share it): call
        /// ``DriverSession/stop()`` on logout.
        public func run() async {
            await session.start()
            let updates = await session.updates()
            // A new subscription starts with the whole present (connection, list, opened details,
            // every pending and refused action). What changed while this store was not listening (an
            // action applied, a detail dropped) has no update of its own in that replay, so the
            // mirrors start over from it instead of keeping entries nothing would ever remove.
            details = [:]
            pendingActions = []
            refusedActions = []
            for await update in updates { apply(update) }
        }

        /// The driver has seen refusal `id`: it leaves ``refusedActions`` here and in the session.
        public func dismissRefusal(_ id: ActionID) async {
            refusedActions.removeAll { $0.id == id }
            await session.dismissRefusal(id)
        }

        /// The opened detail of `id`, if fetched; open it with ``open(_:)``.
        public func detail(_ id: OrderID) -> OrderDetail? { details[id] }

        /// Opens the detail of `id` (fetching it if needed); it then stays current in ``detail(_:)``.
        /// A detail closed while its fetch ran stays closed; an update newer than the fetched one is kept.
        /// - Throws: ``WaybillClientError``.
        public func open(_ id: OrderID) async throws {
            opened.insert(id)
            let fetched = try await session.detail(id)
            // Closed while the fetch ran: it stays closed (the session no longer keeps it current, and
            // nothing would ever remove it); and an update that came meanwhile may be newer (found by
            // a review, 2026-12-05).
            guard opened.contains(id), (details[id]?.version ?? .min) <= fetched.version else { return }
            details[id] = fetched
        }

        /// Closes the detail of `id`: it is no longer refetched.
        public func close(_ id: OrderID) async {
            opened.remove(id)
            details[id] = nil
            await session.closeDetail(id)
        }

        /// Details opened here and not closed since.
        private var opened: Set<OrderID> = []

        /// Applies one update (public so an app can feed a store from its own stream, e.g. in previews).
        public func apply(_ update: SessionUpdate) {
            switch update {
            case .orders(let rows):
                orders = rows
                lastFailure = nil
            case .detail(let detail): details[detail.id] = detail
            case .detailRemoved(let id): details[id] = nil
            case .connection(let state): connectionState = state
            case .failure(let error): lastFailure = error
            case .action(let action):
                if let index = pendingActions.firstIndex(where: { $0.id == action.id }) {
                    if action.state.isPending { pendingActions[index] = action } else { pendingActions.remove(at: index) }
                } else if action.state.isPending {
                    pendingActions.append(action)
                }
                if case .refused = action.state, !refusedActions.contains(where: { $0.id == action.id }) {
                    refusedActions.append(action)
                }
            }
        }
    }
#endif
