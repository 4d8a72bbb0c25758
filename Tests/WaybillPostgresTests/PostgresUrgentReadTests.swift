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
    @Test func anUrgentReadRunsWhileEveryReaderIsBusy() async throws {
        let store = try await openStore(try await freshDatabase(), readers: 1)
        defer { store.close() }
        let held = Mutex(true)
        let gate = DispatchSemaphore(value: 0), blocking = DispatchSemaphore(value: 0)
        let blocker = Task {
            try await store.read { tx in
                _ = try tx.newestEventID()
                blocking.signal()
                _ = gate.wait(timeout: .now() + 20)
                held.withLock { $0 = false }
            }
        }
        defer { gate.signal() }
        #expect(blocking.wait(timeout: .now() + 20) == .success, "the one reader is held")
        let queued = Task { try await store.read { tx in try tx.newestEventID() } }
        let sawHeld = try await store.urgentRead { tx in
            _ = try tx.newestEventID()
            return held.withLock { $0 }
        }
        #expect(sawHeld, "the urgent read ran on its own connection while the reader was held")
        gate.signal()
        try await blocker.value
        _ = try await queued.value
    }
}
