import Testing
import WaybillTesting

@testable import WaybillClient

#if canImport(Observation)
    import Observation

    @MainActor
    @Suite(.timeLimit(.minutes(1))) struct OrdersStoreTests {
        @Test func storeMirrorsTheSessionForSwiftUI() async throws {
            let h = Harness()
            let store = OrdersStore(session: h.session)
            let running = Task { await store.run() }
            await h.waitForConnections(1)
            h.transport.current?.receiveConnected()
            await eventually("orders shown") { store.orders.map(\.id) == [1, 2, 3] }
            await eventually("live shown") { store.connectionState == .live }
            try await store.open(2)
            #expect(store.detail(2)?.id == 2)
            h.api.touch(2)
            await h.receiveEvents([(order: 2, eventID: 11)])
            await h.clock.advance(by: .milliseconds(250))
            await eventually("detail updated") { store.detail(2)?.status == .accepted }
            running.cancel()
            await running.value
        }

        /// A detail closed while its fetch was on its way stays closed: the fetch's answer put it back,
        /// and nothing (the session no longer keeps it) would ever refresh or remove it.
        @Test func aDetailClosedWhileItsFetchRanStaysClosed() async throws {
            let h = await Harness.live()
            let store = OrdersStore(session: h.session)
            let running = Task { await store.run() }
            h.api.holdDetails(true)
            let opening = Task { try await store.open(2) }
            await eventually("fetch on its way") { h.api.heldDetailCount == 1 }
            await store.close(2)
            h.api.holdDetails(false)
            h.api.releaseDetails()
            try await opening.value
            #expect(store.detail(2) == nil)
            try await store.open(2)  // opened again, it is shown
            #expect(store.detail(2)?.id == 2)
            running.cancel()
            await running.value
        }

        /// SwiftUI restarts `.task` when a view comes back: what changed meanwhile (an action applied, a
        /// refusal dismissed) must not linger in the store, which would never hear of it.
        @Test func aStoreThatRunsAgainForgetsWhatChangedWhileItWasAway() async throws {
            let h = await Harness.live()
            let store = OrdersStore(session: h.session)
            h.api.failWrites([.unreachable("offline")])
            h.api.refuseWrites(to: 3)
            var running = Task { await store.run() }
            let accept = try await h.session.queue(.changeStatus(of: 1, to: .accepted))
            let refused = try await h.session.queue(.changeStatus(of: 3, to: .accepted))
            await eventually("pending shown") { store.pendingActions.map(\.id) == [accept.id, refused.id] }
            running.cancel()
            await running.value
            await h.clock.advance(by: .seconds(1))  // the retry: the first goes through, the second is refused
            await eventually("both done") { await h.session.pendingActions.isEmpty }
            #expect(store.pendingActions.count == 2)  // nobody told the store yet
            running = Task { await store.run() }
            // The replay brings the refusal back and nothing else.
            await eventually("refusal shown") { store.refusedActions.map(\.id) == [refused.id] }
            #expect(store.pendingActions.isEmpty)
            await store.dismissRefusal(refused.id)
            #expect(store.refusedActions.isEmpty)
            #expect(await h.session.refusedActions.isEmpty)
            running.cancel()
            await running.value
            running = Task { await store.run() }
            await eventually("connection shown") { store.connectionState == .live }
            await h.settle()
            #expect(store.refusedActions.isEmpty)
            running.cancel()
            await running.value
        }

        @Test func observersAreNotifiedOfListChanges() {
            let store = OrdersStore(session: Harness().session)
            let changed = LockedLog()
            withObservationTracking {
                _ = store.orders
            } onChange: {
                changed.append("orders")
            }
            store.apply(.orders([OrderSummary(id: 1, number: "N/1", status: .new, title: "T")]))
            #expect(changed.entries == ["orders"])
        }
    }
#endif
