import Foundation
import Synchronization
import Testing
import WaybillStorage
import WaybillTesting

@testable import WaybillPostgres

/// The live path's reads (`urgentRead`: the hub feed's, the relay's, the session watcher's) do
/// not wait for a reader to come free: the store keeps a connection for them, used when every
/// other reader is busy (a reconnect storm's replays).
@Suite(.timeLimit(.minutes(2))) struct PostgresUrgentReadTests {
    /// The kept connection is opened with the store, not in the storm that first needs it, when
    /// the server may be out of connection slots.
    @Test func theKeptConnectionIsOpenBeforeAnyCall() async throws {
        let name = "waybill-kept-\(UInt32.random(in: 0...UInt32.max))"
        let store = try await openStore(try await freshDatabase(), name: name, writers: 1, readers: 1)
        defer { store.close() }
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(name)'"
        #expect(await eventually { (try? await runBlocking { try PostgresServer.shared().psql(sql) }) == "1" })
    }

    @Test func anUrgentReadRunsWhileEveryReaderIsBusy() async throws {
        let store = try await openStore(try await freshDatabase(), readers: 1)
        defer { store.close() }
        let held = Mutex(true), started = Moment()
        let gate = DispatchSemaphore(value: 0)
        let blocker = Task {
            try await store.read { tx in
                _ = try tx.newestEventID()
                started.come()
                _ = gate.wait(timeout: .now() + 20)
                held.withLock { $0 = false }
            }
        }
        defer { gate.signal() }
        #expect(await eventually { started.hasCome }, "the one reader is held")
        let queued = Task { try await store.read { tx in try tx.newestEventID() } }
        #expect(await eventually { store.queuedReads == 1 }, "a read waits for the held reader")
        let sawHeld = try await store.urgentRead { tx in
            _ = try tx.newestEventID()
            return held.withLock { $0 }
        }
        #expect(sawHeld, "the urgent read ran on its own connection while the reader was held")
        #expect(store.queuedReads == 1, "the kept connection took the urgent read only")
        gate.signal()
        try await blocker.value
        _ = try await queued.value
    }
}
