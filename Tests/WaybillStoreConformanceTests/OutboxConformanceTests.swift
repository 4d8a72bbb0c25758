import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

@Suite struct OutboxConformanceTests {
    /// Appends, in separate transactions: an Acme order for Alice, an unassigned one, a Globex one.
    private func appendThree(_ store: any OrderStore, _ fixture: Fixture) async throws -> [StoredEvent] {
        var stored: [StoredEvent] = []
        for order in [
            sampleOrder(in: fixture.acme.id, number: "1", driver: fixture.alice.id, status: .assigned),
            sampleOrder(in: fixture.acme.id, number: "2"),
            sampleOrder(in: fixture.globex.id, number: "1"),
        ] {
            stored += try await store.write { tx in try tx.appendEvents([createdEvent(tx.insertOrder(order))]) }
        }
        return stored
    }

    /// Every group an event names gets it once, also a group named twice (the event's rows for all
    /// of its groups go in one statement on SQLite).
    @Test(arguments: Backend.allCases) func anEventReachesEachOfItsGroupsOnce(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, driver: fixture.alice.id, status: .assigned))
            }
            var event = createdEvent(order)
            event.groups = [.company(fixture.acme.id), .driver(fixture.alice.id), .company(fixture.acme.id), .fleet(fixture.acme.id)]
            let stored = try await store.write { [event] tx in try tx.appendEvents([event]) }
            for group in [Group.company(fixture.acme.id), .fleet(fixture.acme.id), .driver(fixture.alice.id)] {
                let seen = try await store.read { tx in try tx.events(of: group, after: .zero, limit: 10) }
                #expect(seen.map(\.id) == stored.map(\.id), "\(group)")
            }
            let other = try await store.read { tx in try tx.events(of: .driver(fixture.bob.id), after: .zero, limit: 10) }
            #expect(other.isEmpty)
        }
    }

    /// An event for a fleet without its company is refused, by either append, and nothing of its
    /// write commits: a fleet's events are read from its company's index rows (`EventGroupRows`),
    /// so it would never be read back by the fleet. One for a company without its fleet is not
    /// replayed to the fleet, which never got it live.
    @Test(arguments: Backend.allCases) func aFleetOnlyEventIsRefusedAndACompanyOnlyOneIsNotReplayedToTheFleet(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            var event = createdEvent(order)
            event.groups = [.fleet(fixture.acme.id), .driver(fixture.alice.id)]
            let newest = try await store.read { tx in try tx.newestEventID() }
            let inTransaction = await #expect(throws: StoreError.self) {
                try await store.write { [event] tx in
                    var changed = order
                    changed.notes = "changed"
                    _ = try tx.updateOrder(changed)
                    return try tx.appendEvents([event])
                }
            }
            #expect("\(inTransaction.map { "\($0)" } ?? "")".contains("fleet"))
            await #expect(throws: StoreError.self) {
                try await store.write(appendingEvents: { [event] _ in ((), [event]) })
            }
            #expect(try await store.read { tx in try tx.newestEventID() } == newest)
            let stored = try await store.read { tx in try tx.order(order.id!, in: fixture.acme.id) }
            #expect(stored?.notes == order.notes, "the write rolled back")
            // Both listed: accepted, and read back by both. A company without its fleet: accepted,
            // and not read back by the fleet (SQLite walks the company's rows for it).
            event.groups = [.company(fixture.acme.id)]
            let companyOnly = try await store.write { [event] tx in try tx.appendEvents([event]) }
            event.groups = [.fleet(fixture.acme.id), .company(fixture.acme.id)]
            let accepted = try await store.write { [event] tx in try tx.appendEvents([event]) }
            let fleet = try await store.read { tx in try tx.events(of: .fleet(fixture.acme.id), after: newest, limit: 1) }
            #expect(fleet == accepted, "the limit counts the fleet's events only")
            #expect(try await store.read { tx in try tx.events(of: .fleet(fixture.acme.id), after: newest, limit: 10) } == accepted)
            let company = try await store.read { tx in try tx.events(of: .company(fixture.acme.id), after: newest, limit: 10) }
            #expect(company == companyOnly + accepted)
        }
    }

    /// Each appended event gets its own secret salt, kept and read back with it: its cursor cannot
    /// be computed from what a client could know of another company's event (its id, kind, order
    /// and commit time), so the cursor of the node's newest event, which every `connected` and
    /// `pong` frame carries, gives none of those away (a review, 2026-12-05).
    @Test(arguments: Backend.allCases) func eachEventHasASecretSaltThatItsCursorDependsOn(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            let appended = try await store.write { tx in try tx.appendEvents([createdEvent(order), createdEvent(order)]) }
            let stored = try await store.read { tx in try tx.events(after: .zero, limit: 10) }
            #expect(stored == appended)
            #expect(stored.allSatisfy { $0.salt != 0 })
            #expect(Set(stored.map(\.salt)).count == 2)
            for event in stored {
                let guessed = StoredEvent(id: event.id, event: event.event, committedAt: event.committedAt)
                #expect(event.cursor != guessed.cursor, "not computable from the public fields")
                #expect(try await store.read { tx in try tx.event(event.id) }?.cursor == event.cursor)
            }
        }
    }

    /// An event of a kind a newer release added (a newer node committed it in a rolling upgrade) is
    /// read back under its name, by group and in order, with the events after it: the read failed
    /// on it before, and a node's feed and replays with it.
    @Test(arguments: Backend.allCases) func anEventOfANewerReleasesKindReadsBackWithTheOnesAfterIt(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            var newer = createdEvent(order)
            newer.type = try #require(OrderEventType(rawValue: "order_archived"))
            let stored = try await store.write { [newer] tx in try tx.appendEvents([newer]) }
            let after = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            let all = try await store.read { tx in try tx.events(after: .zero, limit: 10) }
            #expect(all == stored + after)
            #expect(all.first?.event.type.rawValue == "order_archived")
            let mine = try await store.read { tx in try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 10) }
            #expect(mine.map(\.cursor) == (stored + after).map(\.cursor))
            #expect(try await store.read { tx in try tx.event(stored[0].id) } == stored[0])
        }
    }

    @Test(arguments: Backend.allCases) func appendedEventsGetStrictlyIncreasingIDsAndReadBackWhole(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            #expect(try await store.read { tx in try tx.newestEventID() } == .zero)
            let order = try await store.write { tx in
                try tx.insertOrder(sampleOrder(in: fixture.acme.id, driver: fixture.alice.id, status: .assigned))
            }
            var reassigned = order
            reassigned.driverID = fixture.bob.id
            // t0 + 0.5 s is exactly representable, so the stored time compares equal.
            let events = Broadcaster.events(for: .assigned(before: order, after: reassigned), at: t0 + 0.5)
            let first = try await store.write { tx in try tx.appendEvents(events) }
            let second = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            #expect((first + second).map(\.id) == [1, 2, 3, 4])
            #expect(first.map(\.event) == events)
            let all = try await store.read { tx in try tx.events(after: .zero, limit: 100) }
            #expect(all == first + second)
            #expect(all[0].event.oldDriverID == fixture.alice.id)
            #expect(all[2].event.oldDriverID == fixture.alice.id && all[2].event.driverID == nil)
            #expect(try await store.read { tx in try tx.newestEventID() } == EventID(4))
            #expect(try await store.write { tx in try tx.appendEvents([]) } == [])
        }
    }

    @Test(arguments: Backend.allCases) func groupReadsSeeOnlyThatGroupInOrder(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let all = try await appendThree(store, fixture)
            let reads = try await store.read { tx in
                (
                    try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 10),
                    try tx.events(of: .driver(fixture.alice.id), after: .zero, limit: 10),
                    try tx.events(of: .fleet(fixture.globex.id), after: .zero, limit: 10),
                    try tx.events(of: .company(fixture.acme.id), after: EventID(1), limit: 10),
                    try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 1),
                    try tx.events(of: .driver(fixture.bob.id), after: .zero, limit: 10),
                    try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 0)
                )
            }
            #expect(reads.0 == [all[0], all[1]])
            #expect(reads.1 == [all[0]])
            #expect(reads.2 == [all[2]])
            #expect(reads.3 == [all[1]])
            #expect(reads.4 == [all[0]])
            #expect(reads.5 == [])
            #expect(reads.6 == [])
        }
    }

    @Test(arguments: Backend.allCases) func theRelayCursorOnlyMovesForwardAndNotPastTheNewestEvent(
        _ backend: Backend
    ) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            #expect(try await store.read { tx in try tx.oldestUnrelayedEventTime() } == nil)
            clock.set(t0 + 1)
            let all = try await appendThree(store, fixture)
            let state = try await store.read { tx in (try tx.relayedThrough(), try tx.oldestUnrelayedEventTime()) }
            #expect(state.0 == .zero)
            #expect(state.1 == t0 + 1)

            try await store.write { tx in try tx.markRelayed(through: all[1].id) }
            try await store.write { tx in try tx.markRelayed(through: all[0].id) }
            #expect(try await store.read { tx in try tx.relayedThrough() } == all[1].id)
            try await store.write { tx in try tx.markRelayed(through: EventID(1000)) }
            #expect(try await store.read { tx in try tx.relayedThrough() } == all[2].id)
            #expect(try await store.read { tx in try tx.oldestUnrelayedEventTime() } == nil)
        }
    }

    @Test(arguments: Backend.allCases) func oldestUnrelayedTimeIsThatOfTheFirstEventAfterTheCursor(
        _ backend: Backend
    ) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            for second in 1...3 {
                clock.set(t0 + Double(second))
                _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            }
            try await store.write { tx in try tx.markRelayed(through: EventID(1)) }
            #expect(try await store.read { tx in try tx.oldestUnrelayedEventTime() } == t0 + 2)
        }
    }

    /// The pruner deletes in chunks, one short transaction each: a limit caps each call, the prefix
    /// rule holds chunk by chunk, and the last call says nothing more is due.
    @Test(arguments: Backend.allCases) func pruningInChunksDeletesAtMostTheLimitPerCall(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            clock.set(t0 + 1)
            _ = try await store.write { tx in try tx.appendEvents((1...5).map { _ in createdEvent(order) }) }
            try await store.write { tx in try tx.markRelayed(through: EventID(5)) }
            var deleted: [Int] = []
            for _ in 0..<4 {
                deleted.append(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 100, limit: 2) })
            }
            // The newest event (5) stays however old: a `connected` frame hands out its cursor.
            #expect(deleted == [2, 2, 0, 0])
            #expect(try await store.read { tx in try tx.prunedThrough() } == EventID(4))
            #expect(try await store.read { tx in try tx.events(after: .zero, limit: 10) }.map(\.id) == [5])

            // Idempotency records the same way.
            try await store.write { tx in
                for n in 1...3 {
                    let request = IdempotentRequest(
                        userID: fixture.alice.id, key: "k\(n)", method: "POST", path: "/api/orders/", fingerprint: [UInt8(n)])
                    _ = try tx.claimIdempotencyKey(request, token: "t\(n)", at: t0, staleAfter: 60)
                }
            }
            var keys: [Int] = []
            for _ in 0..<3 {
                keys.append(try await store.write { tx in try tx.pruneIdempotencyKeys(before: t0 + 10, limit: 2) })
            }
            #expect(keys == [2, 1, 0])
        }
    }

    @Test(arguments: Backend.allCases) func pruningDeletesOnlyRelayedOldEventsAsAPrefix(_ backend: Backend) async throws
    {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            // Events 1…5 committed at t0+1 … t0+5, then event 6 with a clock that stepped back.
            for second in [1, 2, 3, 4, 5, 0] {
                clock.set(t0 + Double(second))
                _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            }
            // Nothing relayed: nothing pruned, however old.
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 100) } == 0)

            try await store.write { tx in try tx.markRelayed(through: EventID(4)) }
            // Relayed 1…4, but only 1…2 are older than t0+3, and 2 stays with 3, the first kept.
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 3) } == 1)
            var state = try await store.read { tx in
                (
                    try tx.prunedThrough(), try tx.events(after: .zero, limit: 10).map(\.id),
                    try tx.events(of: .company(fixture.acme.id), after: .zero, limit: 10).map(\.id)
                )
            }
            #expect(state.0 == EventID(1))
            #expect(state.1 == [2, 3, 4, 5, 6])
            #expect(state.2 == [2, 3, 4, 5, 6])

            // Everything relayed and old: 2…5 go, and event 6's older stamp never caused a hole before.
            // Event 6, the newest, stays: a resume from the cursor a `connected` frame hands out
            // must find its event, or it is a reset.
            try await store.write { tx in try tx.markRelayed(through: EventID(6)) }
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 100) } == 4)
            state = try await store.read { tx in
                (try tx.prunedThrough(), try tx.events(after: .zero, limit: 10).map(\.id), [])
            }
            #expect(state.0 == EventID(5))
            #expect(state.1 == [6])
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 100) } == 0)
            #expect(try await store.read { tx in try tx.newestEventID() } == EventID(6), "pruning never rewinds ids")
            let next = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            #expect(next.map(\.id) == [7])
            try await store.write { tx in try tx.markRelayed(through: EventID(7)) }
            clock.set(t0 + 200)
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 300) } == 1, "6 is no longer the newest")
        }
    }

    @Test(arguments: Backend.allCases) func pruningStopsAtTheFirstEventThatIsTooNew(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            // Event 3 is newer than event 4 (another process's clock): 4 must wait for 3 (and 2, the
            // event before the first kept, stays with it).
            for second in [1, 2, 10, 3] {
                clock.set(t0 + Double(second))
                _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            }
            try await store.write { tx in try tx.markRelayed(through: EventID(4)) }
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 5) } == 1)
            #expect(try await store.read { tx in try tx.prunedThrough() } == EventID(1))
        }
    }

    /// After a quiet spell longer than the retention, a driver's cursor names the event before the
    /// first new one (its last pong's position): that event stays until the one after it is old
    /// too, so a resume right after the next commit is no `reset`.
    @Test(arguments: Backend.allCases) func theEventBeforeTheFirstOneKeptStays(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            for second in [1, 2, 1000] {
                clock.set(t0 + Double(second))
                _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            }
            try await store.write { tx in try tx.markRelayed(through: EventID(3)) }
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 500) } == 1)
            #expect(try await store.read { tx in try tx.events(after: .zero, limit: 10) }.map(\.id) == [2, 3])
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 500) } == 0)

            // Event 3 ages out too while 4 is young: 2 goes, 3 (before the first kept) stays.
            clock.set(t0 + 2000)
            _ = try await store.write { tx in try tx.appendEvents([createdEvent(order)]) }
            try await store.write { tx in try tx.markRelayed(through: EventID(4)) }
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 1500) } == 1)
            #expect(try await store.read { tx in try tx.events(after: .zero, limit: 10) }.map(\.id) == [3, 4])
        }
    }

    @Test(arguments: Backend.allCases) func anEventReadsBackByIDWithTheSameCursor(_ backend: Backend) async throws {
        // A commit time with a fraction of a millisecond: stored and read back as milliseconds.
        let clock = ManualClock(t0 + 0.123_456)
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let appended = try await store.write { tx in
                try tx.appendEvents([createdEvent(tx.insertOrder(sampleOrder(in: fixture.acme.id)), at: t0 + 0.25)])
            }
            let read = try await store.read { tx in
                (try tx.event(appended[0].id), try tx.event(EventID(99)), try tx.events(after: .zero, limit: 1))
            }
            #expect(read.0 == appended[0])
            #expect(read.0?.cursor == appended[0].cursor, "the cursor handed out at commit matches the stored event")
            #expect(read.0?.committedAt == Date(timeIntervalSince1970: 1_764_500_000.123))
            #expect(read.1 == nil)
            #expect(read.2.first?.cursor == appended[0].cursor)
            #expect(read.0.map { appended[0].cursor.matches($0) } == true)
        }
    }

    @Test(arguments: Backend.allCases) func aPrunedEventIsGoneByID(_ backend: Backend) async throws {
        let clock = ManualClock()
        try await withStore(backend, clock: clock) { store in
            let fixture = try await Fixture.seed(store)
            let order = try await store.write { tx in try tx.insertOrder(sampleOrder(in: fixture.acme.id)) }
            _ = try await store.write { tx in try tx.appendEvents([createdEvent(order), createdEvent(order)]) }
            try await store.write { tx in try tx.markRelayed(through: EventID(1)) }
            #expect(try await store.write { tx in try tx.pruneEvents(committedBefore: t0 + 1) } == 1)
            let read = try await store.read { tx in (try tx.event(EventID(1)), try tx.event(EventID(2))?.id) }
            #expect(read.0 == nil)
            #expect(read.1 == EventID(2))
        }
    }
}
