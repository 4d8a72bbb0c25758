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
