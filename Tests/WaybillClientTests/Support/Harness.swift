import Foundation
import Testing
import WaybillTesting

@testable import WaybillClient

/// Waits until `condition` holds, letting other tasks run; records an issue if it never does.
///
/// Real time only bounds the wait (10 s, generous for a loaded CI machine); the session under test never
/// sleeps for real, and a passing condition returns at once.
func eventually(
    _ what: String = "condition",
    within limit: Duration = .seconds(10),
    isolation: isolated (any Actor)? = #isolation,
    sourceLocation: SourceLocation = #_sourceLocation,
    _ condition: () async -> Bool
) async {
    let deadline = ContinuousClock.now.advanced(by: limit)
    while ContinuousClock.now < deadline {
        if await condition() { return }
        await Task.yield()
    }
    if await condition() { return }
    Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
}

/// A session on a virtual clock with a fake API and a fake socket, and shortcuts to drive them.
struct Harness {
    let clock: TestClock
    let api: FakeOrdersAPI
    let transport = FakeEventTransport()
    let storage: InMemoryActionStorage
    let session: DriverSession

    /// The wall-clock time the session stamps on actions: a fixed date plus the virtual clock's time.
    static func wallClock(_ clock: TestClock) -> @Sendable () -> Date {
        { Date(timeIntervalSince1970: 1_800_000_000 + clock.now.offset.seconds) }
    }

    /// - Parameter heartbeat: whether the session pings. Off unless a test is about it: a virtual minute
    ///   passes in no real time, faster than a loaded machine may deliver the pongs.
    /// - Parameters: `api`, `storage`, `clock`: pass those of an earlier harness to play an app restart
    ///   (same server, same device storage, time goes on); `seed` then differs, as a new process's would.
    init(
        configuration: DriverSession.Configuration = .init(), heartbeat: Bool = false, orders: [OrderID] = [1, 2, 3],
        api: FakeOrdersAPI? = nil, storage: InMemoryActionStorage = InMemoryActionStorage(), clock: TestClock = TestClock(),
        seed: UInt64 = 42
    ) {
        var configuration = configuration
        if !heartbeat { configuration.heartbeatInterval = nil }
        self.api = api ?? FakeOrdersAPI(orders: orders)
        self.storage = storage
        self.clock = clock
        session = DriverSession(
            api: self.api,
            transport: transport,
            clock: clock,
            configuration: configuration,
            random: SeededGenerator(seed: seed),
            actionStorage: storage,
            wallClock: Self.wallClock(clock)
        )
    }

    /// Starts the session, lets its socket connect and go live, and waits until the start-up fetches are done.
    static func live(
        configuration: DriverSession.Configuration = .init(), heartbeat: Bool = false, orders: [OrderID] = [1, 2, 3],
        api: FakeOrdersAPI? = nil, storage: InMemoryActionStorage = InMemoryActionStorage(), clock: TestClock = TestClock(),
        seed: UInt64 = 42
    ) async -> Harness {
        let harness = Harness(
            configuration: configuration, heartbeat: heartbeat, orders: orders, api: api, storage: storage, clock: clock,
            seed: seed)
        await harness.session.start()
        await harness.waitForConnections(1)
        harness.transport.current?.receiveConnected()
        await eventually("live") { await harness.session.connectionState == .live }
        await harness.clock.advance(by: configuration.coalescingWindow)
        await harness.waitUntilIdle()
        return harness
    }

    func waitForConnections(_ count: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("\(count) connections", sourceLocation: sourceLocation) {
            transport.connections.count >= count
        }
    }

    /// Drops the live socket with `code` and returns once the session backs off. The backoff's
    /// deadline is set when the session takes the close: a test that moved the clock before that
    /// (on a loaded machine) left the deadline past its window, and waited for a reconnect in vain.
    func drop(code: Int, sourceLocation: SourceLocation = #_sourceLocation) async {
        transport.current?.drop(code: code)
        await waitForBackoff(sourceLocation: sourceLocation)
    }

    /// Returns once the session is backing off (see `drop(code:)`).
    func waitForBackoff(sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("backing off", sourceLocation: sourceLocation) {
            if case .backingOff = await session.connectionState { return true } else { return false }
        }
    }

    /// `socket` (the live one by default) receives `frame`, which opens the coalescing window (a
    /// `reset`); returns once the window's timer is armed, so the clock moves only after the
    /// session took the frame (see `drop(code:)`).
    func receiveOpeningTheWindow(
        _ frame: String, on socket: FakeConnection? = nil, window: Duration = .milliseconds(250),
        sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let due = clock.now.advanced(by: window)
        (socket ?? transport.current)?.receive(frame)
        await eventually("the coalescing window armed", sourceLocation: sourceLocation) { clock.deadlines.contains(due) }
    }

    /// Drops the live socket (1012) and lets the session connect again, resuming; the new socket
    /// answers no ping by itself (the test plays the pong that follows the replay). Returns it once
    /// `connected` (newest event `newest`) is in and the client's probe ping went out.
    func dropAndResume(newest: Int64 = 20, sourceLocation: SourceLocation = #_sourceLocation) async throws
        -> FakeConnection
    {
        await drop(code: 1012, sourceLocation: sourceLocation)
        await clock.advance(by: .seconds(1))
        await waitForConnections(2, sourceLocation: sourceLocation)
        let socket = try #require(transport.current, sourceLocation: sourceLocation)
        socket.goSilent()
        socket.receiveConnected(newest: newest)
        await eventually("probe sent", sourceLocation: sourceLocation) { socket.sent.contains(#"{"type":"ping"}"#) }
        await settle()
        return socket
    }

    /// Opens detail `id` the way the app does (one fetch, then it is cached and kept current).
    func open(_ id: OrderID) async throws {
        _ = try await session.detail(id)
    }

    /// Waits until no list fetch runs or is queued and no coalescing window is open, so a test that
    /// counts requests from here counts only its own.
    func waitUntilIdle(sourceLocation: SourceLocation = #_sourceLocation) async {
        await eventually("session idle", sourceLocation: sourceLocation) {
            let loaded = await session.hasLoadedOrders
            let idle = await session.isIdle
            return loaded && idle
        }
    }

    /// Lets every runnable task run until it suspends again.
    func settle() async { await clock.settle() }

    /// The live socket receives `frames` events, and the session has read them all.
    func receiveEvents(_ events: [(order: Int64, eventID: Int64)], type: String = "order_status_changed") async {
        for event in events { transport.current?.receiveEvent(type, order: event.order, eventID: event.eventID) }
        guard let last = events.last?.eventID else { return }
        await eventually("event \(last) read") { await session.lastEventID == EventID(last) }
    }
}
