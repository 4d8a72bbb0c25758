extension DriverSession {
    /// Applies evictions at once and collects the rest of `work` in the coalescing window.
    func enqueue(_ work: SyncWork) {
        for id in work.evictions { evict(id) }
        switch coalescer.add(work) {
        case .startTimer(let window):
            let timer = startTimer(window)
            coalescingTask = Task {
                do { try await timer(1) } catch { return }
                self.flush()
            }
        case .none:
            break
        }
    }

    /// The coalescing window closed: one list fetch and one fetch per affected opened detail.
    private func flush() {
        coalescingTask = nil
        guard isRunning, let work = coalescer.windowElapsed() else { return }
        if work.refreshesList { perform(list.bumpRevision()) }
        let ids = work.refreshesAllDetails ? openDetails : work.details.intersection(openDetails)
        for id in ids.sorted() { refreshDetail(id) }
    }

    // MARK: - The list

    /// Carries out what the list loader decided.
    func perform(_ action: ListLoader.Action) {
        guard isRunning else { return }
        switch action {
        case .fetch(let etag):
            restartCountdown()
            listTask = Task { await self.fetchList(ifNoneMatch: etag) }
        case .retry(let attempt):
            // Jittered like reconnects: after an outage every phone's fetch failed at once.
            let delay = listRetryPolicy.delay(forAttempt: attempt, random: &random) ?? list.pollInterval
            restartCountdown(after: min(delay, list.pollInterval))
        case .none:
            break
        }
    }

    /// An opened detail's refetch was answered "wait" (429, a 5xx: a node dying behind its proxy)
    /// while the socket may stay live and no other event come: the next poll, which refetches every
    /// opened detail behind its row (`checkOpenDetails`), comes after the list's backoff instead of
    /// the full interval, as for a list fetch answered so. It waited up to 120 s, the screen showing
    /// the old order while the list showed the new one (found by a review, 2026-12-07). Offline
    /// (no answer), the reconnect refetches instead, as for lists.
    ///
    /// The backoff counts the list's own "wait" answers too (the server said wait to both), and
    /// never pushes back a poll that comes sooner (the list's own retry, or this one's for another
    /// opened order in the same round, which does not count as one more failure).
    private func pollSoonForDetails() {
        let attempt = max(detailRetryAttempt, list.unavailableInARow)
        let delay = min(listRetryPolicy.delay(forAttempt: attempt, random: &random) ?? list.pollInterval, list.pollInterval)
        if let countdown = pollCountdown, countdown.interval - countdown.elapsed() <= delay { return }
        detailRetryAttempt = attempt + 1
        restartCountdown(after: delay)
    }

    private func restartCountdown(after interval: Duration? = nil) {
        pollTask?.cancel()
        let interval = interval ?? list.pollInterval
        let timer = startTimer(interval)
        pollCountdown = (startStopwatch(), interval)
        pollTask = Task {
            do { try await timer(1) } catch { return }
            self.countdownElapsed()
        }
    }

    private func countdownElapsed() {
        pollTask = nil
        pollCountdown = nil
        guard isRunning else { return }
        let action = list.countdownElapsed()
        if action == .none { restartCountdown() }  // a fetch is running; poll again a full interval later
        perform(action)
    }

    private func fetchList(ifNoneMatch etag: String?) async {
        let outcome: ListLoader.Outcome
        let generation = historyGeneration
        do {
            switch try await api.orders(ifNoneMatch: etag) {
            case .modified(let rows, let newTag):
                guard !Task.isCancelled else { return }
                orders = rows
                ordersGeneration = generation  // receipts skip rows read before a `reset`
                hasLoadedOrders = true
                publish(.orders(rows))
                checkOpenDetails(against: rows)
                reportShown()
                // A `reset` came while this fetch ran: its rows are of the old history. Its tag is
                // not kept, so the refetch the reset asked for reads the list whole and stamps the
                // rows with the new history; against the old tag it got a 304, and receipts left
                // every row out until the list changed (found by a review, 2026-12-05).
                outcome = .modified(etag: generation == historyGeneration ? newTag : nil)
            case .notModified:
                // The rows are the same, but an opened detail may still be behind its row: its
                // refetch failed (a flaky network, a 502) and nothing else would ever retry it.
                checkOpenDetails(against: orders)
                outcome = .notModified
            }
            machine.restAnswered()
            serverLooksReachable()
        } catch {
            guard !Task.isCancelled else { return }
            let failure = WaybillClientError(error)
            publish(.failure(failure))
            outcome = failure.saysWait ? .unavailable : .failed
            if failure == .notAuthenticated { perform(machine.tokenRefused()) }
        }
        guard !Task.isCancelled else { return }
        listTask = nil
        perform(list.fetchFinished(outcome))
    }

    /// Polling is the safety net for details too: an opened detail older than its list row, or gone from
    /// the list (unassigned, deleted), is refetched; a 404 then drops it.
    private func checkOpenDetails(against rows: [OrderSummary]) {
        let versions = Dictionary(rows.map { ($0.id, $0.version) }, uniquingKeysWith: max)
        for (id, cached) in details where !detailFetches.isFetching(id) {
            // One fetched before the last `reset` whose refetch failed or was dropped by a stop: its
            // row may show the same version (a restore), but actions on it are refused until it is
            // fetched again (`showsDetailFromAnEarlierHistory`).
            if versions[id] != cached.detail.version || cached.generation < historyGeneration { refreshDetail(id) }
        }
        // Opened, but never fetched: its first fetch failed (offline, a 503), and the screen still
        // waits for it (found by a review: neither the poll nor a reconnect ever asked again).
        for id in openDetails.sorted() where details[id] == nil && !detailFetches.isFetching(id) { refreshDetail(id) }
    }

    // MARK: - Details

    /// Refetches an opened detail, at most one fetch in flight and one queued per order.
    func refreshDetail(_ id: OrderID) {
        guard isRunning, openDetails.contains(id) else { return }
        if detailFetches.request(id) { startDetailFetch(id) }
    }

    private func startDetailFetch(_ id: OrderID) {
        detailTasks[id] = Task { await self.fetchDetail(id) }
    }

    private func fetchDetail(_ id: OrderID) async -> Result<OrderDetail, WaybillClientError> {
        let result: Result<OrderDetail, WaybillClientError>
        let generation = historyGeneration
        do {
            var answer = try await api.order(id, ifNoneMatch: details[id]?.etag)
            if case .notModified = answer, details[id] == nil {
                // The copy this fetch was conditional on was dropped meanwhile (the screen closed and
                // opened again): the 304 confirms nothing the session still has, so ask for the order.
                answer = try await api.order(id, ifNoneMatch: nil)
            }
            switch answer {
            case .modified(let detail, let etag):
                result = .success(keep(detail, etag: etag, of: id, readIn: generation))
            case .notModified:
                if let cached = details[id] {
                    result = .success(cached.detail)
                } else {
                    result = .failure(.badResponse("304 for an order not cached"))
                }
            }
            if case .success = result { detailRetryAttempt = 0 }
        } catch {
            let failure = WaybillClientError(error)
            if failure == .notFound { evict(id) }  // deleted or unassigned: it is no longer this driver's
            // A token refused on any request stops the session as close code 4001 does (PROTOCOL.md).
            if failure == .notAuthenticated, !Task.isCancelled, isRunning { perform(machine.tokenRefused()) }
            if failure.saysWait, !Task.isCancelled, isRunning, openDetails.contains(id) { pollSoonForDetails() }
            result = .failure(failure)
        }
        guard !Task.isCancelled else { return result }
        if detailFetches.finished(id) {
            startDetailFetch(id)
        } else {
            detailTasks[id] = nil
        }
        return result
    }

    /// Caches a fetched detail of an opened order and returns what the session now shows for it.
    ///
    /// A fetch answered before the driver's own write can arrive after that write's answer: within
    /// one history the cache never goes back to an older version (versions only grow), or the screen
    /// would flip back and the next tap would name a stale version and get 412. After a `reset` the
    /// refetch replaces the cache whatever its version: history rewound (found by a review: the
    /// guard kept a version the restored server no longer had, and with it no `If-Match`).
    private func keep(_ detail: OrderDetail, etag: String?, of id: OrderID, readIn generation: Int) -> OrderDetail {
        guard openDetails.contains(id), !Task.isCancelled else { return detail }
        if let cached = details[id], !cached.isReplaced(byVersion: detail.version, readIn: generation, orSame: true) {
            return cached.detail
        }
        cache(detail, etag: etag, of: id, readIn: generation)
        publish(.detail(detail))
        reportShown()
        return detail
    }

    /// Drops a detail from the cache and tells subscribers; an event or a 404 said it is gone.
    func evict(_ id: OrderID) {
        let wasCached = details.removeValue(forKey: id) != nil
        let wasOpen = openDetails.remove(id) != nil
        detailFetches.cancelQueued(id)
        if openDetails.isEmpty { detailRetryAttempt = 0 }
        if wasCached || wasOpen { publish(.detailRemoved(id)) }
    }

    /// Opens order `id`: returns its detail and keeps it current until ``closeDetail(_:)``.
    ///
    /// Returns the cached detail when there is one (events keep it fresh); otherwise fetches it, joining a
    /// fetch already in flight rather than starting a second.
    /// - Throws: ``WaybillClientError/notFound`` if the order is gone or not this driver's (it is then not
    ///   open), or another ``WaybillClientError``. After any other failure (offline, a 503) the order
    ///   stays open, as the screen that asked for it usually does: the next event, poll or ``refresh()``
    ///   fetches it and publishes ``SessionUpdate/detail(_:)``. A screen that goes away on the error
    ///   calls ``closeDetail(_:)``.
    public func detail(_ id: OrderID) async throws -> OrderDetail {
        openDetails.insert(id)
        if let cached = details[id] { return cached.detail }
        if detailTasks[id] == nil {
            _ = detailFetches.request(id)
            startDetailFetch(id)
        }
        guard let task = detailTasks[id] else { throw WaybillClientError.badResponse("no fetch") }
        let result = await task.value
        if case .failure(let error) = result, error == .notFound { openDetails.remove(id) }
        return try result.get()
    }

    /// The cached detail of an opened order, without any request.
    public func cachedDetail(_ id: OrderID) -> OrderDetail? { details[id]?.detail }

    /// The app closed the detail screen of `id`: stop refetching it and drop it from the cache.
    public func closeDetail(_ id: OrderID) {
        let wasShown = openDetails.remove(id) != nil || details[id] != nil
        details[id] = nil
        detailFetches.cancelQueued(id)
        if openDetails.isEmpty { detailRetryAttempt = 0 }
        // Whoever shows the detail (a screen, `OrdersStore`) drops it too: it is no longer refreshed.
        if wasShown { publish(.detailRemoved(id)) }
    }

    // MARK: - Writes

    /// Moves order `id` to `status` (`POST /api/orders/{id}/status`), then refreshes what shows it.
    ///
    /// Sent with `If-Match` for the version `expecting` names (by default the opened detail's, so the driver
    /// never acts on an order that changed under their eyes). The refresh goes through the coalescing
    /// window, so the server's own event for this change costs nothing extra; and it still happens when
    /// the socket is down.
    /// - Throws: ``WaybillClientError/conflict`` when the order changed meanwhile (412) or its state forbids
    ///   the transition (409) — the order is then reloaded —, or another ``WaybillClientError``.
    public func changeStatus(of id: OrderID, to status: OrderStatus, expecting: ExpectedVersion = .shownDetail)
        async throws
    {
        try await write(.changeStatus(of: id, to: status), expecting)
    }

    /// Marks stage `stage` of order `id` done, then refreshes what shows it.
    /// - Throws: ``WaybillClientError``; ``WaybillClientError/conflict`` as for ``changeStatus(of:to:expecting:)``.
    public func completeStage(_ stage: StageID, of id: OrderID, expecting: ExpectedVersion = .shownDetail)
        async throws
    {
        try await write(.completeStage(stage, of: id), expecting)
    }

    /// Attaches document metadata (`name`, `kind`, e.g. `proof_of_delivery`) to order `id`, then refreshes it.
    /// - Throws: ``WaybillClientError``; ``WaybillClientError/conflict`` as for ``changeStatus(of:to:expecting:)``.
    public func attachDocument(
        named name: String, kind: String, to id: OrderID, expecting: ExpectedVersion = .shownDetail
    ) async throws {
        try await write(.attachDocument(name: name, kind: kind, to: id), expecting)
    }

    /// Sends one write with its `If-Match`, keeps the answer, and refreshes what shows the order.
    ///
    /// The answer is REST state (not an event payload), so an opened detail takes it at once: the driver's
    /// next action then names the version this one created instead of failing with 412 against it. A
    /// refusal (409/412) means what is shown is stale: it is refreshed too, before the error is thrown.
    /// A 2xx whose body cannot be read is a success: the order is fetched instead of taken from it.
    private func write(_ action: DriverAction, _ expecting: ExpectedVersion) async throws {
        let id = action.orderID
        // The shown detail predates a `reset`: its version may name other content now (its refetch
        // is on its way; the driver acts again on what it brings).
        if showsDetailFromAnEarlierHistory(id, expecting) {
            await reloadOpenedDetail(id)  // as after a 412: the next try names what this brings
            throw WaybillClientError.conflict
        }
        let ifMatch = expecting.ifMatch(for: id, cachedETag: details[id]?.etag, cachedVersion: details[id]?.detail.version)
        let generation = historyGeneration
        let saved: SavedOrder
        do {
            saved = try await api.send(
                action, ifMatch: ifMatch, orderCreatedAt: createdAt(of: id, expecting), idempotencyKey: nil)
        } catch {
            let failure = WaybillClientError(error)
            if failure.isUnreadableSuccess {
                // The server did it; only its answer is unreadable: show the order as it now is.
                await reloadOpenedDetail(id)
                enqueueRefresh(of: id)
                return
            }
            if failure == .conflict {
                await reloadOpenedDetail(id)
                enqueueRefresh(of: id)
            }
            if failure == .notAuthenticated, isRunning { perform(machine.tokenRefused()) }
            throw failure
        }
        show(saved, of: id, readIn: generation)
        enqueueRefresh(of: id)
    }

    /// Fetches an opened detail at once, outside the coalescing window: after a refusal the caller's
    /// `catch` reads ``cachedDetail(_:)`` and the driver's next tap names the version the server has.
    /// A failed fetch changes nothing (the queued refresh tries again).
    private func reloadOpenedDetail(_ id: OrderID) async {
        let generation = historyGeneration
        guard isRunning, openDetails.contains(id),
            case .modified(let detail, let etag)? = try? await api.order(id, ifNoneMatch: nil)
        else { return }
        _ = keep(detail, etag: etag, of: id, readIn: generation)
    }

    /// Stores a detail asked for in history `generation`. One asked for before the last reset may
    /// replace a copy as old as itself, but never with its tag: after a failover its version can
    /// name other content, and the refetch the reset queued would send that tag and keep what no
    /// longer exists on a 304 (found by a review).
    private func cache(_ detail: OrderDetail, etag: String?, of id: OrderID, readIn generation: Int) {
        details[id] = CachedDetail(detail: detail, etag: generation < historyGeneration ? nil : etag, generation: generation)
    }

    /// An opened detail takes the order a write answered, unless it already shows the same or a newer
    /// version of the same history (`generation`: the session's when the write was sent).
    func show(_ saved: SavedOrder, of id: OrderID, readIn generation: Int) {
        guard openDetails.contains(id) else { return }
        if let cached = details[id], !cached.isReplaced(byVersion: saved.order.version, readIn: generation, orSame: false) {
            return
        }
        cache(saved.order, etag: saved.etag, of: id, readIn: generation)
        publish(.detail(saved.order))
        reportShown()
    }

    func enqueueRefresh(of id: OrderID) {
        guard isRunning else { return }
        var work = SyncWork.list
        if openDetails.contains(id) { work.details.insert(id) }
        enqueue(work)
    }
}

extension WaybillClientError {
    /// Any error as a ``WaybillClientError``: itself, or "unreachable" for transport failures.
    init(_ error: any Error) {
        if let error = error as? WaybillClientError {
            self = error
        } else {
            self = .unreachable("request failed")
        }
    }
}

extension DriverSession {
    /// Whether no fetch runs or is queued and no coalescing window is open (tests wait for this).
    var isIdle: Bool { listTask == nil && coalescingTask == nil && detailTasks.isEmpty }

    /// Detail fetches running or queued to run (tests wait for this).
    var detailFetchesInFlight: Int { detailTasks.count }

    /// Whether no action is being sent (tests wait for this).
    var isSendingAction: Bool { actionTask != nil }
}
