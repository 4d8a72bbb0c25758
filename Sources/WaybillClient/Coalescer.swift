/// Collects sync work for a short window so a burst of events costs one list fetch and one fetch per detail.
///
/// The window opens with the first piece of work and is not extended by later ones, so a steady stream of
/// events still refreshes the app at least once per window (a debounce could starve it).
struct Coalescer: Sendable {
    enum Action: Hashable, Sendable {
        /// Start a timer for `window`, then call ``windowElapsed()``.
        case startTimer(Duration)
        /// A timer is already running.
        case none
    }

    let window: Duration
    private(set) var pending: SyncWork?

    init(window: Duration) { self.window = window }

    /// Adds `work` to the open window, opening one if none is.
    mutating func add(_ work: SyncWork) -> Action {
        if pending == nil {
            pending = work
            return .startTimer(window)
        }
        pending?.merge(work)
        return .none
    }

    /// The window closed: returns everything collected in it.
    mutating func windowElapsed() -> SyncWork? {
        defer { pending = nil }
        return pending
    }
}
