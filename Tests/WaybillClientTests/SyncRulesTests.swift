import Testing

@testable import WaybillClient

@Suite(.timeLimit(.minutes(1))) struct SyncRulesTests {
    private func event(_ order: OrderID, _ kind: OrderEventKind = .statusChanged) -> OrderEventFrame {
        OrderEventFrame(kind: kind, orderID: order, eventID: 1)
    }

    @Test func everyOrderEventInvalidatesTheList() {
        for kind in [OrderEventKind.created, .updated, .statusChanged, .assigned, .unassigned, .deleted] {
            #expect(SyncRules.work(for: event(1, kind), cached: []).refreshesList)
        }
    }

    @Test func detailIsRefetchedOnlyIfCached() {
        #expect(SyncRules.work(for: event(1), cached: [2]).details.isEmpty)
        #expect(SyncRules.work(for: event(2), cached: [2]).details == [2])
    }

    @Test func deleteEvictsTheCachedDetailInsteadOfRefetchingIt() {
        let work = SyncRules.work(for: event(2, .deleted), cached: [2])
        #expect(work.details.isEmpty)
        #expect(work.evictions == [2])
        #expect(SyncRules.work(for: event(3, .deleted), cached: [2]).evictions.isEmpty)
    }

    @Test func laterDeleteCancelsAnEarlierRefetchInTheSameWindow() {
        var work = SyncRules.work(for: event(2), cached: [2])
        work.merge(SyncRules.work(for: event(2, .deleted), cached: [2]))
        #expect(work.details.isEmpty)
        #expect(work.evictions == [2])
    }

    @Test func coalescerOpensOneWindowForABurst() {
        var coalescer = Coalescer(window: .milliseconds(250))
        var actions: [Coalescer.Action] = []
        for i in 0..<50 {
            let order = OrderID(Int64(i % 3 + 1))
            actions.append(coalescer.add(SyncRules.work(for: event(order), cached: [1])))
        }
        #expect(actions.first == .startTimer(.milliseconds(250)))
        #expect(actions.dropFirst().allSatisfy { $0 == .none })
        #expect(coalescer.windowElapsed() == SyncWork(refreshesList: true, details: [1]))
        #expect(coalescer.windowElapsed() == nil)
        #expect(coalescer.add(.list) == .startTimer(.milliseconds(250)))
    }

    @Test func resetWorkCoversAllDetails() {
        var coalescer = Coalescer(window: .milliseconds(250))
        _ = coalescer.add(.list)
        _ = coalescer.add(.everything)
        #expect(coalescer.windowElapsed() == .everything)
    }

    @Test func deduplicatorKeepsOneFetchInFlightAndOneQueued() {
        var fetches = FetchDeduplicator<OrderID>()
        let requests = [fetches.request(1), fetches.request(1), fetches.request(1), fetches.request(2)]
        #expect(requests == [true, false, false, true])
        let finishes = [fetches.finished(1), fetches.finished(1)]
        #expect(finishes == [true, false])  // one more fetch, however many were asked for
        let again = fetches.request(1)
        fetches.cancelQueued(1)
        let last = fetches.finished(1)
        #expect(again && !last)
        #expect(!fetches.isFetching(1))
    }

    /// A fetch the server answered with "wait" (429, 5xx) is tried again after a backoff that grows
    /// with each one in a row; a change asked for meanwhile goes with that retry. Offline or a 4xx
    /// waits for the next poll or change, as before; a good answer starts the count over.
    @Test func listLoaderRetriesAFetchTheServerAskedToWaitFor() {
        var loader = ListLoader(pollInterval: .seconds(120))
        #expect(loader.start() == .fetch(ifNoneMatch: nil))
        #expect(loader.bumpRevision() == .none)  // during the fetch
        #expect(loader.fetchFinished(.unavailable) == .retry(attempt: 0))
        #expect(loader.countdownElapsed() == .fetch(ifNoneMatch: nil))
        #expect(loader.fetchFinished(.unavailable) == .retry(attempt: 1))
        #expect(loader.countdownElapsed() == .fetch(ifNoneMatch: nil))
        #expect(loader.fetchFinished(.failed) == .none, "offline: the reconnect refetches")
        #expect(loader.unavailableInARow == 2)
        #expect(loader.bumpRevision() == .fetch(ifNoneMatch: nil))
        #expect(loader.fetchFinished(.modified(etag: "\"v2\"")) == .none)
        #expect(loader.unavailableInARow == 0)
        #expect(loader.bumpRevision() == .fetch(ifNoneMatch: "\"v2\""))
        #expect(loader.fetchFinished(.unavailable) == .retry(attempt: 0), "the count started over")
        #expect(loader.countdownElapsed() == .fetch(ifNoneMatch: "\"v2\""))
        #expect(loader.fetchFinished(.unavailable) == .retry(attempt: 1))
        loader.stopped()
        #expect(loader.start() == .fetch(ifNoneMatch: "\"v2\""))
        #expect(loader.fetchFinished(.unavailable) == .retry(attempt: 0), "a new start counts afresh")
    }

    @Test func listLoaderFetchesOnceMoreWhenTheRevisionChangesMidFetch() {
        var loader = ListLoader(pollInterval: .seconds(120))
        #expect(loader.start() == .fetch(ifNoneMatch: nil))
        #expect(loader.bumpRevision() == .none)
        #expect(loader.bumpRevision() == .none)
        #expect(loader.revision == 2)
        #expect(loader.fetchFinished(.modified(etag: "\"v1\"")) == .fetch(ifNoneMatch: "\"v1\""))
        #expect(loader.fetchFinished(.notModified) == .none)
        #expect(loader.countdownElapsed() == .fetch(ifNoneMatch: "\"v1\""))
        #expect(loader.countdownElapsed() == .none)  // already fetching
        #expect(loader.fetchFinished(.failed) == .none)
        #expect(loader.etag == "\"v1\"")
    }
}
