import CWebSockets

/// Graceful shutdown on the service thread: refuse new work, flush and close sockets with 1001,
/// let in-flight HTTP finish, and end the loop when drained or at the deadline.
extension ServerCore {
    func beginShutdown() {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        drainDeadline = .now + configuration.shutdownDrain
        idleDrainDeadline = .now + configuration.idleConnectionDrain
        idleCloseDeadline = idleDrainDeadline
        requestDrainDeadline =
            .now + max(configuration.requestDrain, configuration.shutdownDrain) + configuration.idleConnectionDrain
        // Every answer from here on closes its connection, also one already being written.
        for session in inFlight.values { session.closeAfterResponse = true }
        stopListening()
        for id in sockets.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            close(id, code: 1001, reason: "server shutdown")
        }
        scheduleDrainCheck()
    }

    /// Closes every open WebSocket with `code` after its queue (work for them was refused: they
    /// resume from their cursor and miss nothing). Service thread.
    func closeAllWebSockets(code: Int, reason: String) {
        for id in sockets.keys.sorted(by: { $0.rawValue < $1.rawValue }) {
            close(id, code: code, reason: reason)
        }
    }

    /// Service thread: whether the loop may end now. Sockets get `shutdownDrain`; a request in
    /// flight gets `requestDrain`, so its answer (the outcome of a write that may commit) still
    /// goes out. It ended at the sockets' 3 s, and a write that committed later went unanswered
    /// (found by a review, 2026-12-05).
    var isDrained: Bool {
        guard isShuttingDown else { return false }
        let now = ContinuousClock.now
        return (sockets.isEmpty || now >= drainDeadline) && (inFlight.isEmpty || now >= requestDrainDeadline)
            && (now >= idleCloseDeadline || !hasIdleConnection)
    }

    /// Whether a request that arrives now, during shutdown, is answered (with `Connection: close`)
    /// rather than refused with 503: only while idle connections are kept (`idleConnectionDrain`),
    /// so a proxy's request on one of them is served, not lost.
    var answersLateRequests: Bool { isShuttingDown && ContinuousClock.now < idleDrainDeadline }

    /// The drain tick: past `idleConnectionDrain`, the idle connections still open are closed,
    /// at every tick (a connection whose answer was still going out goes idle later).
    func closeIdleConnectionsIfDue() {
        guard isShuttingDown, ContinuousClock.now >= idleCloseDeadline else { return }
        closeIdleConnections()
    }

    /// A periodic tick so `lws_service` returns and the loop re-checks `isDrained` even when idle.
    func scheduleDrainCheck() {
        guard let context = loop.context else { return }
        drainTimer.pointee.owner = Unmanaged.passUnretained(self).toOpaque()
        lws_sul_schedule(context, 0, lwsx_timer_sul(drainTimer), drainTick, 50_000)
    }

    /// Stops the tick before the context (and the timer's list) goes away.
    func cancelDrainCheck() {
        lws_sul_cancel(lwsx_timer_sul(drainTimer))
    }
}

/// The drain tick (a C callback, so a top-level `func`).
func drainTick(_ sul: UnsafeMutablePointer<lws_sorted_usec_list_t>?) {
    guard let sul, let owner = lwsx_timer_owner(sul) else { return }
    let core = Unmanaged<ServerCore>.fromOpaque(owner).takeUnretainedValue()
    core.closeIdleConnectionsIfDue()
    if !core.isDrained { core.scheduleDrainCheck() }
}
