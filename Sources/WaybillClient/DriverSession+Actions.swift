import struct Foundation.Data
import struct Foundation.Date

/// The offline queue (SPEC §5 rule 8): the driver's actions are kept on the device and sent in order.
extension DriverSession {
    /// Queues a driver action and sends it as soon as the server is reachable (at once when it is).
    ///
    /// The action is stored through the session's ``ActionStorage`` before this returns, so it survives an
    /// app restart; a new session over the same storage resumes the queue. It is sent with its own
    /// `Idempotency-Key` (the returned ``QueuedAction/id``) and `If-Match` for the version `expecting` names
    /// (by default the opened detail's). Show it at once as pending (``pendingActions(for:)``): the list and
    /// detail stay the server's state until the server has applied it. ``SessionUpdate/action(_:)`` reports
    /// every step: waiting, sending, applied, or refused with the server's reason (409, 412, 422, …).
    /// - Throws: an error of the storage when the action cannot be kept; it is then not queued.
    @discardableResult
    public func queue(_ action: DriverAction, expecting: ExpectedVersion = .shownDetail) throws -> QueuedAction {
        // Not running: the storage is held for this write only, however it ends (kept, refused at
        // once, not kept); the session that runs sends what it keeps.
        defer { if !isRunning { releaseActionStorage() } }
        try loadStoredQueueIfNeeded()
        let id = ActionID.random(using: &random)
        let queued = QueuedAction(
            id: id,
            action: action,
            ifMatch: expecting.ifMatch(
                for: action.orderID, cachedETag: details[action.orderID]?.etag,
                cachedVersion: details[action.orderID]?.detail.version),
            orderCreatedAt: createdAt(of: action.orderID, expecting),
            queuedAt: wallClock(),
            seenEventID: machine.lastEventID,
            seenCursor: machine.lastCursor
        )
        if showsDetailFromAnEarlierHistory(action.orderID, expecting) {
            // The detail on screen predates a `reset` and its refetch has not come: its version may
            // name other content now. Refused at once, like a queued action at the `reset`.
            var refusal = queued
            refusal.state = .refused(ActionQueue.rewound)
            keepRefusal(refusal)
            publish(.action(refusal))
            enqueueRefresh(of: action.orderID)
            return refusal
        }
        var candidate = actionQueue
        candidate.add(queued)
        try actionStorage.save(StoredActionQueue.encode(candidate.actions, refused: refused))
        storageBehind = false  // the whole queue went with it
        actionQueue = candidate
        publish(.action(queued))
        sendNextAction()
        return queued
    }

    /// When order `id` was created, as what the action names says (`If-Order-Created`): the opened
    /// detail for the shown detail's version, else the list's row, else the detail. An action queued
    /// offline then never reaches another order that took the id after a restore, which the queue's
    /// refusal on `reset` does not cover when the device's cursor is from before the order's own
    /// event (the list fetched the order before the socket brought the event, then coverage went,
    /// and after the restore the cursor is still in the history: no `reset` comes). Taken from the
    /// source of the version it names: a detail from before a `reset` and a row from after it may be
    /// two orders under one id.
    func createdAt(of id: OrderID, _ expecting: ExpectedVersion) -> Date? {
        let detail = details[id]?.detail.createdAt, row = orders.first { $0.id == id }?.createdAt
        return expecting.kind == .shownDetail ? detail ?? row : row ?? detail
    }

    /// Whether an action `expecting` the shown detail of order `id` would name the version of a
    /// detail fetched before the session's last `reset` (its refetch is still on its way).
    func showsDetailFromAnEarlierHistory(_ id: OrderID, _ expecting: ExpectedVersion) -> Bool {
        guard expecting.kind == .shownDetail, let cached = details[id] else { return false }
        return cached.generation < historyGeneration
    }

    /// Actions waiting or being sent, oldest first.
    public var pendingActions: [QueuedAction] { actionQueue.actions }

    /// The pending actions of order `id`, oldest first: what a row or detail screen overlays on the
    /// server's state ("accepted — waiting for coverage").
    public func pendingActions(for id: OrderID) -> [QueuedAction] { actionQueue.actions.filter { $0.orderID == id } }

    /// Actions dropped from the queue (refused by the server, given up, or expired), oldest first,
    /// until ``dismissRefusal(_:)``: so a screen opened later still shows them. Kept in the action
    /// storage too, so a new session (the app killed and started again) still has them; the newest 100.
    public var refusedActions: [QueuedAction] { refused }

    /// The driver has seen refusal `id`: forget it (also in the storage, when no other session holds
    /// it; otherwise it comes back when this session reads the storage again).
    public func dismissRefusal(_ id: ActionID) {
        defer { if !isRunning { releaseActionStorage() } }
        try? loadStoredQueueIfNeeded()  // a stopped session's storage first (else not written: it comes back)
        refused.removeAll { $0.id == id }
        persistActions()
    }

    /// How many refusals are kept for the driver to see; older ones go first.
    static let keptRefusals = 100

    /// `action` was dropped from the queue: kept for the driver (in memory and in the storage).
    func keepRefusal(_ action: QueuedAction) {
        refused.append(action)
        if refused.count > Self.keptRefusals { refused.removeFirst(refused.count - Self.keptRefusals) }
        persistActions()
    }

    // MARK: - Sending

    /// Sends the head of the queue if nothing is in flight and no backoff runs; drops expired heads.
    func sendNextAction() {
        // While a resume's outcome is unknown, a `reset` may still come (`StateMachine.holdsActions`).
        // Without the storage's claim (another session holds it) the queue may be another's now.
        guard isRunning, !machine.holdsActions, !storedQueueNotLoaded else { return }
        while true {
            switch actionQueue.next(now: wallClock()) {
            case .send(let action):
                persistActions()  // "being sent" is stored as "may have been applied" (a kill mid-send)
                publish(.action(action))
                actionTask = Task { await self.send(action) }
                return
            case .dropped(let action):
                keepRefusal(action)
                publish(.action(action))
                enqueueRefresh(of: action.orderID)  // what the driver now checks must be current
            case .idle:
                return
            }
        }
    }

    private func send(_ queued: QueuedAction) async {
        let outcome: ActionQueue.Outcome
        let generation = historyGeneration
        do {
            let saved = try await api.send(
                queued.action, ifMatch: queued.ifMatch, orderCreatedAt: queued.orderCreatedAt,
                idempotencyKey: queued.id.rawValue)
            outcome = .applied(saved)
        } catch {
            let failure = WaybillClientError(error)
            outcome = ActionQueue.outcome(for: failure)
            // The action stays queued for the next login; the session stops as on close code 4001.
            if failure == .notAuthenticated, !Task.isCancelled, isRunning {
                headRefusedByServer = true  // the stop puts it back to waiting, not "may have applied"
                perform(machine.tokenRefused())
                headRefusedByServer = false
            }
        }
        guard !Task.isCancelled, isRunning else { return }  // `stop()` put it back to waiting
        actionTask = nil
        let finish = actionQueue.finished(outcome, random: &random)
        switch finish {
        case .applied(let action, let saved):
            persistActions()
            publish(.action(action))
            show(saved, of: action.orderID, readIn: generation)
            enqueueRefresh(of: action.orderID)
        case .appliedUnread(let action):
            persistActions()
            publish(.action(action))
            // Nothing readable to show: the opened detail is fetched at once (a tap meanwhile would
            // name the version this action moved from), the list through the usual window.
            refreshDetail(action.orderID)
            enqueueRefresh(of: action.orderID)
        case .refused(let action):
            keepRefusal(action)
            publish(.action(action))
            enqueueRefresh(of: action.orderID)  // what is shown is probably stale: that is why it was refused
        case .retry(let action, let delay):
            persistActions()  // its server-failure count
            publish(.action(action))
            let timer = startTimer(delay)
            actionBackoffTask = Task {
                do { try await timer(1) } catch { return }
                self.actionBackoffElapsed()
            }
        case .none:
            break
        }
        sendNextAction()
    }

    private func actionBackoffElapsed() {
        actionBackoffTask = nil
        actionQueue.backoffElapsed()
        sendNextAction()
    }

    /// Something showed the server is reachable (socket live, a fetch answered, the network is back):
    /// a waiting action goes now instead of after its backoff. A stored queue that could not be read
    /// yet (another session still held the file, a locked phone) is tried again first: before, only
    /// the app coming back or a new action read it, and its actions were neither shown nor sent
    /// meanwhile (found by a review, 2026-12-05).
    func serverLooksReachable() {
        guard isRunning else { return }
        try? loadStoredQueueIfNeeded()
        guard !actionQueue.actions.isEmpty else { return }
        if actionQueue.wake() {
            actionBackoffTask?.cancel()
            actionBackoffTask = nil
        }
        sendNextAction()
    }

    /// The socket said `reset`: the server's history is not the one the queued actions were made in
    /// (a restore or a failover that lost commits). An action that names a version (`If-Match`) may
    /// now match a version with other content, and any action's order id may now name another order
    /// (the id counter came back with the restore), so each is refused for the driver to check the
    /// order and act again. One already sent cannot be recalled.
    func refuseActionsFromBeforeTheRewind() {
        guard !actionQueue.actions.isEmpty else { return }
        let dropped = actionQueue.historyRewound()
        for action in dropped {
            keepRefusal(action)
            publish(.action(action))
        }
        persistActions()  // also the mark on an action that was on its way
    }

    /// The session stops: a send in flight is abandoned (it is resent, with the same key, after `start()`).
    func stopSendingActions() {
        actionTask?.cancel()
        actionTask = nil
        actionBackoffTask?.cancel()
        actionBackoffTask = nil
        if actionQueue.isSending {
            actionQueue.interrupted(refused: headRefusedByServer)
            if headRefusedByServer { persistActions() }  // the stored "sending" mark said "may have applied"
            if let head = actionQueue.actions.first { publish(.action(head)) }
        } else {
            actionQueue.interrupted()
        }
    }

    /// Writes the queue through the storage. A failure here is reported, not fatal: the queue in memory
    /// is still right, and the next change writes it all again.
    func persistActions() {
        guard !storedQueueNotLoaded else { return }  // never write over a queue that was not read
        do {
            try actionStorage.save(StoredActionQueue.encode(actionQueue.actions, refused: refused))
            storageBehind = false
        } catch {
            storageBehind = true
            publish(.failure(.badResponse("cannot save the action queue")))
        }
    }

    /// Why a stored queue did not load.
    enum StoredQueueProblem: Equatable {
        /// The storage could not be read (permissions, I/O, a phone not yet unlocked): left where it
        /// is, and read again before the first write (``loadStoredQueueIfNeeded()``).
        case notLoaded
        /// It was read but cannot be decoded: set aside (``ActionStorage/setAsideUnreadable()``), so
        /// the first new action does not overwrite it. One that could not be set aside is
        /// ``notLoaded``: never written over.
        case setAside
    }

    /// Reads the queue a previous session left in `storage`.
    static func loadActions(
        from storage: any ActionStorage
    ) -> (actions: [QueuedAction], refused: [QueuedAction], problem: StoredQueueProblem?) {
        guard case .success(let loaded) = Result(catching: { try storage.load() }),
            let decoded = try? decode(loaded, from: storage)
        else { return ([], [], .notLoaded) }
        return decoded
    }

    /// The actions and refusals in what `storage` held (nothing: none); what cannot be decoded is set aside.
    /// - Throws: the storage's error when it cannot set it aside.
    private static func decode(
        _ data: Data?, from storage: any ActionStorage
    ) throws -> (actions: [QueuedAction], refused: [QueuedAction], problem: StoredQueueProblem?) {
        guard let data else { return ([], [], nil) }
        guard let stored = try? StoredActionQueue.read(data) else {
            try storage.setAsideUnreadable()
            return ([], [], .setAside)
        }
        return (stored.actions, stored.refused, nil)
    }

    /// The stored queue could not be read when the session was made: read it now, before anything
    /// is written over it, and put its actions first (they are older than anything queued since —
    /// nothing was, as this runs before the first action is kept).
    /// - Throws: the storage's error when it still cannot be read; the new action is then not kept.
    func loadStoredQueueIfNeeded() throws {
        guard storedQueueNotLoaded else { return }
        if actionClaim == nil { actionClaim = try claimActionStorage() }  // throws while another holds it
        let (stored, storedRefused, problem) = try Self.decode(actionStorage.load(), from: actionStorage)
        storedQueueNotLoaded = false
        actionStorageUnreadable = problem != nil  // still true only if what was read had to be set aside
        // After this session let the storage go (`releaseActionStorage`), what is stored is the
        // whole queue: its own actions as it left them, and whatever a session after it changed.
        let known = Set((actionQueue.actions + refused).map(\.id))
        let replaces = storedQueueIsWhole
        storedQueueIsWhole = false
        actionQueue = ActionQueue(policy: actionQueue.policy, actions: stored + (replaces ? [] : actionQueue.actions))
        refused = storedRefused + (replaces ? [] : refused)
        // Their history must be checked as at a start (`DriverSession.init`): resume from it.
        let earlier = stored.filter { !known.contains($0.id) }
        if let point = QueuedAction.resumePoint(of: earlier) {
            perform(machine.adoptResumePoint(eventID: point.eventID, cursor: point.cursor))
        }
        if !actionQueue.actions.isEmpty { sendNextAction() }
    }

    /// Lets another session take the storage: a session holds it while it runs, and a session that
    /// does not run only for a write (an action queued, a refusal dismissed). An app that stops a
    /// session (logout, a 4001) and makes a new one over the same file got ``ActionStorageInUse``
    /// from the new one for as long as anything kept the old one alive (a fetch still waiting for
    /// its answer, or the app's own reference), since the claim went only with the session (found
    /// by a review, 2026-12-05). Every change was stored as it was made, so the file holds this
    /// session's queue; it reads it again before it sends or keeps anything more
    /// (``loadStoredQueueIfNeeded()``), and neither sends nor writes until then.
    func releaseActionStorage() {
        guard actionClaim != nil else { return }
        // A save that failed (a full disk) left the file behind memory: one more try, or the
        // next read would put an applied action back in the queue.
        if storageBehind {
            persistActions()
            if storageBehind { return }  // still behind: nobody else may read it as this session's queue
        }
        actionClaim = nil
        // Read and written through: what is stored is the whole queue. Not read (the file could not
        // be): nothing was written either, and the next read puts what it holds first, as before.
        if !storedQueueNotLoaded {
            storedQueueNotLoaded = true
            storedQueueIsWhole = true
        }
    }
}
