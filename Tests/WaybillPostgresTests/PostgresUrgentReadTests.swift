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
        #expect(await eventually { (try? await psql(sql)) == "1" })
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

    /// A store whose kept reader looks after its connection every 100 ms (connect retries: 100 ms
    /// doubling to 400 ms, unless `retry` says otherwise), named for `pg_stat_activity`.
    private func storeCheckingOften(
        _ url: String, name: String, retry: Duration = .milliseconds(100)
    ) async throws -> PostgresOrderStore {
        try await runBlocking {
            try PostgresOrderStore(
                url: url, applicationName: name, writerCount: 1, readerCount: 1, callBudget: .seconds(30),
                // The product's: these tests time the kept reader's connects and retries.
                connectTimeout: PostgresOrderStore.defaultConnectTimeout, clock: { Date() },
                keptReader: KeptReader.Timing(
                    checkInterval: .milliseconds(100), firstRetry: retry, maximumRetry: max(retry, .milliseconds(400))))
        }
    }

    /// The store's connections now, by application name (the other workers connect only when a call
    /// needs them, and these tests make none: every one counted is the kept reader's).
    private func connections(_ name: String) async -> String? {
        try? await psql("SELECT count(*) FROM pg_stat_activity WHERE application_name = '\(name)'")
    }

    /// The pids of the store's backends now, by application name.
    private func backends(_ name: String) async -> [String]? {
        try? await psql("SELECT pid FROM pg_stat_activity WHERE application_name = '\(name)' ORDER BY pid")
            .split(separator: "\n").map(String.init)
    }

    /// Refuses connections to `database`, ends the store's (`name`), and waits for the kept reader's
    /// warning; runs `whileRefused`, then allows connections again, whatever happened.
    private func refusingConnections(
        to database: String, of store: PostgresOrderStore, name: String,
        _ whileRefused: () async throws -> Void = {}
    ) async throws {
        func allowConnections(_ allowed: Bool) async throws {
            _ = try await psql("ALTER DATABASE \"\(database)\" ALLOW_CONNECTIONS \(allowed)")
        }
        try await allowConnections(false)
        do {
            try await terminate(name)
            #expect(await eventually { store.health.warnings == ["postgres_urgent_reader_unconnected"] })
            try await whileRefused()
        } catch {
            try? await allowConnections(true)
            throw error
        }
        try await allowConnections(true)
    }

    private func terminate(_ name: String) async throws {
        _ = try await psql(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '\(name)'")
    }

    /// A connection the server ended while idle (`idle_session_timeout`, `pg_terminate_backend`, a
    /// restart) is opened again by itself, not by the urgent read that needs it.
    @Test func aKeptConnectionTheServerEndedIsOpenedAgainBeforeAnyCall() async throws {
        let name = "waybill-kept-\(UInt32.random(in: 0...UInt32.max))"
        let store = try await storeCheckingOften(try await freshDatabase(), name: name)
        defer { store.close() }
        #expect(await eventually { await connections(name) == "1" })
        let before = try #require(await backends(name))
        try await terminate(name)
        // Another backend, not the count going to 0 and back: it reconnects within 100 ms, faster
        // than `psql` polls (a CI run never saw the 0).
        #expect(
            await eventually { if let now = await backends(name) { now.count == 1 && now != before } else { false } },
            "the kept reader connected again by itself")
        #expect(store.health.warnings.isEmpty)
        _ = try await store.urgentRead { tx in try tx.newestEventID() }  // and it serves
    }

    /// A kept reader that cannot connect says so in the store's health (the server logs it), keeps
    /// trying, and the warning ends when it connects.
    @Test func aKeptReaderThatCannotConnectIsAWarningUntilItConnectsAgain() async throws {
        let name = "waybill-kept-\(UInt32.random(in: 0...UInt32.max))"
        let url = try await freshDatabase(), database = databaseName(url)
        let store = try await storeCheckingOften(url, name: name)
        defer { store.close() }
        #expect(await eventually { await connections(name) == "1" })
        #expect(store.health.warnings.isEmpty)
        try await refusingConnections(to: database, of: store, name: name) {
            #expect(store.health.problems.isEmpty)
        }
        #expect(await eventually { store.health.warnings.isEmpty }, "connected again")
        #expect(await connections(name) == "1")
    }

    /// The warning ends when the kept reader holds a connection again, also one an urgent read
    /// opened before its own next try (found by a review: it stayed on for good then).
    @Test func theWarningEndsWhenAnUrgentReadHasConnectedTheKeptReader() async throws {
        let name = "waybill-kept-\(UInt32.random(in: 0...UInt32.max))"
        let url = try await freshDatabase(), database = databaseName(url)
        let store = try await storeCheckingOften(url, name: name, retry: .seconds(600))
        defer { store.close() }
        #expect(await eventually { await connections(name) == "1" })
        try await refusingConnections(to: database, of: store, name: name)
        // Its own next try is 10 minutes away: only the urgent read below can connect it. The one
        // other reader is held, so the urgent read goes to the kept one.
        let gate = DispatchSemaphore(value: 0), started = Moment()
        let blocker = Task {
            try await store.read { tx in
                _ = try tx.newestEventID()
                started.come()
                _ = gate.wait(timeout: .now() + 20)
            }
        }
        defer { gate.signal() }
        #expect(await eventually { started.hasCome }, "the one reader is held")
        _ = try await store.urgentRead { tx in try tx.newestEventID() }
        #expect(await eventually { store.health.warnings.isEmpty }, "connected by the urgent read")
        gate.signal()
        try await blocker.value
    }
}
