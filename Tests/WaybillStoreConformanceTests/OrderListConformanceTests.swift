import Foundation
import Testing
import WaybillDomain
import WaybillStorage
import WaybillStoreTesting

/// `orderPage` and `orderCounts`: keyset paging, every filter, `ids`, counts — alike on every backend.
@Suite struct OrderListConformanceTests {
    /// Inserts `count` orders of `company` numbered `prefix-1…`, cycling through `statuses` and `drivers`.
    private static func insert(
        _ count: Int, in company: CompanyID, prefix: String, statuses: [OrderStatus] = [.new],
        drivers: [UserID?] = [nil], title: @Sendable @escaping (Int) -> String = { "Load \($0)" }, updatedAt: @Sendable @escaping (Int) -> Date = { _ in t0 },
        into store: any OrderStore
    ) async throws -> [OrderSummary] {
        try await store.write { tx in
            try (1...count).map { index in
                var order = sampleOrder(
                    in: company, number: "\(prefix)-\(index)", driver: drivers[index % drivers.count],
                    status: statuses[index % statuses.count], title: title(index))
                order.updatedAt = updatedAt(index)
                return try tx.insertOrder(order).summary
            }
        }
    }

    /// Every page of `query`, following `before` until `hasMore` is false.
    private static func allPages(
        _ store: any OrderStore, in company: CompanyID, _ query: OrderQuery,
        between: @Sendable (Int) async throws -> Void = { _ in }
    ) async throws -> [[OrderSummary]] {
        var pages: [[OrderSummary]] = []
        var next = query
        while pages.count < 1000 {
            let page = try await store.read { [next] tx in try tx.orderPage(in: company, next) }
            pages.append(page.rows)
            guard let cursor = page.next else { break }
            next.before = cursor
            try await between(pages.count)
        }
        return pages
    }

    @Test(arguments: Backend.allCases) func pagesAreNewestFirstCompleteAndStableWhileOrdersArrive(
        _ backend: Backend
    ) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let initial = try await Self.insert(23, in: fixture.acme.id, prefix: "A", into: store)
            _ = try await Self.insert(3, in: fixture.globex.id, prefix: "G", into: store)
            let pages = try await Self.allPages(store, in: fixture.acme.id, OrderQuery(limit: 5)) { round in
                // New orders arrive between pages: they are newer than every cursor, so no row
                // moves between pages and none repeats.
                _ = try await Self.insert(2, in: fixture.acme.id, prefix: "late\(round)", into: store)
            }
            #expect(pages.map(\.count) == [5, 5, 5, 5, 3])
            #expect(pages.flatMap { $0 } == initial.reversed())
            let exact = try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 31)) }
            let everything = try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)) }
            #expect(everything.rows.count == 31 && !everything.hasMore)
            #expect(exact.rows == everything.rows && !exact.hasMore)
        }
    }

    /// Case is folded for every script, the same on both stores, and whatever PostgreSQL's own
    /// locale (the test cluster runs under "C", where ILIKE folds ASCII letters only).
    @Test(arguments: Backend.allCases) func textSearchFoldsCaseInEveryScript(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let titles = ["Łódź → Kraków", "ÉCOLE Müller", "Αθήνα depot ΟΔΟΣ 5", "Plain load", "straße 5"]
            _ = try await Self.insert(
                titles.count, in: fixture.acme.id, prefix: "Ü", title: { titles[$0 - 1] }, into: store)
            func numbers(_ text: String) async throws -> [String] {
                try await store.read { tx in try tx.orderPage(in: fixture.acme.id, OrderQuery(text: text)).rows.map(\.number) }
            }
            #expect(try await numbers("łódź") == ["Ü-1"])
            #expect(try await numbers("KRAKÓW") == ["Ü-1"])
            #expect(try await numbers("école müller") == ["Ü-2"])
            #expect(try await numbers("ΑΘΉΝΑ") == ["Ü-3"])
            // ICU lower-cases a word-final Σ to ς, Swift to σ: both stores compare them as σ.
            #expect(try await numbers("ΟΔΟΣ") == ["Ü-3"])
            #expect(try await numbers("οδος 5") == ["Ü-3"])
            #expect(try await numbers("οδοσ") == ["Ü-3"])
            #expect(try await numbers("STRASSE") == [])  // lower-casing, not full case folding: ß stays ß
            #expect(try await numbers("STRAßE") == ["Ü-5"])
            #expect(try await numbers("ü-") == ["Ü-5", "Ü-4", "Ü-3", "Ü-2", "Ü-1"])  // the number too
            #expect(try await numbers("muller") == [])  // accents still count
        }
    }

    @Test(arguments: Backend.allCases) func everyFilterNarrowsThePage(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let statuses: [OrderStatus] = [.new, .assigned, .accepted, .inProgress, .completed, .cancelled]
            let rows = try await Self.insert(
                24, in: fixture.acme.id, prefix: "N", statuses: statuses, drivers: [fixture.alice.id, fixture.bob.id],
                title: { $0 == 7 ? "Cheese 100%_off" : $0 == 8 ? "Cheese 1000 off" : "Load \($0)" },
                updatedAt: { t0 + Double($0) }, into: store)
            _ = try await Self.insert(4, in: fixture.globex.id, prefix: "N", statuses: statuses, into: store)
            let newest = Array(rows.reversed())
            func page(_ query: OrderQuery) async throws -> [OrderSummary] {
                try await store.read { tx in try tx.orderPage(in: fixture.acme.id, query).rows }
            }

            #expect(try await page(OrderQuery(statuses: [.completed])) == newest.filter { $0.status == .completed })
            #expect(
                try await page(OrderQuery(statuses: [.new, .cancelled]))
                    == newest.filter { $0.status == .new || $0.status == .cancelled })
            let active = newest.filter { !OrderQuery.finished.contains($0.status) }
            #expect(try await page(OrderQuery(activeOnly: true)) == active)
            #expect(active.count == 16, "\(newest.map(\.status.rawValue))")
            #expect(try await page(OrderQuery(statuses: [.completed], activeOnly: true)) == [])
            #expect(
                try await page(OrderQuery(statuses: [.new, .completed], activeOnly: true))
                    == newest.filter { $0.status == .new })
            #expect(try await page(OrderQuery(driver: fixture.alice.id)) == newest.filter { $0.driverID == fixture.alice.id })
            #expect(
                try await page(OrderQuery(driver: fixture.bob.id, activeOnly: true))
                    == active.filter { $0.driverID == fixture.bob.id })
            #expect(try await page(OrderQuery(updatedAfter: t0 + 20)) == newest.filter { $0.updatedAt > t0 + 20 })
            // Text: number or title, case-insensitive, with LIKE's wildcards taken literally.
            #expect(try await page(OrderQuery(text: "n-1")).map(\.number) == ["N-19", "N-18", "N-17", "N-16", "N-15", "N-14", "N-13", "N-12", "N-11", "N-10", "N-1"])
            #expect(try await page(OrderQuery(text: "cheese")).map(\.number) == ["N-8", "N-7"])
            #expect(try await page(OrderQuery(text: "100%")).map(\.number) == ["N-7"])
            #expect(try await page(OrderQuery(text: "%_")).map(\.number) == ["N-7"])
            #expect(try await page(OrderQuery(text: "e_1")) == [])
            #expect(try await page(OrderQuery(text: "\\")) == [])
            // Filters and the cursor combine.
            let bobActive = active.filter { $0.driverID == fixture.bob.id }
            let firstBob = try await store.read { tx in
                try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.bob.id, activeOnly: true, limit: 2))
            }
            #expect(firstBob.rows == Array(bobActive.prefix(2)) && firstBob.hasMore)
            #expect(
                try await page(OrderQuery(driver: fixture.bob.id, activeOnly: true, before: firstBob.rows[1].id))
                    == Array(bobActive.dropFirst(2)))
        }
    }

    /// The driver list's recent half (`status=completed&status=cancelled&updated_after=…`, narrowed
    /// to the driver), which both stores serve from a partial index of finished orders by driver
    /// and update time (migration 0015): the same rows as the filters say, also for an order
    /// finished long ago and changed since, or one that left the driver or its finished state.
    @Test(arguments: Backend.allCases) func theRecentlyFinishedHalfFollowsUpdatesOfFinishedOrders(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let (alice, bob) = (fixture.alice.id, fixture.bob.id)
            let rows = try await Self.insert(
                30, in: fixture.acme.id, prefix: "F", statuses: [.completed, .cancelled, .inProgress],
                drivers: [alice, bob], updatedAt: { t0 + Double($0) }, into: store)
            let since = t0 + 20
            let recent = OrderQuery(driver: alice, statuses: [.cancelled, .completed], updatedAfter: since, limit: 3)
            func all(_ query: OrderQuery) async throws -> [OrderSummary] {
                try await Self.allPages(store, in: fixture.acme.id, query).flatMap { $0 }
            }
            func expected() async throws -> [OrderSummary] {
                try await store.read { tx in
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(limit: 500)).rows.filter {
                        $0.driverID == alice && OrderQuery.finished.contains($0.status) && $0.updatedAt > since
                    }
                }
            }
            let before = try await expected()
            #expect(before.count >= 3, "\(before.map(\.number))")
            #expect(try await all(recent) == before)

            // Changed after the moment: an old finished order of Alice's comes in; one is given to
            // Bob, one goes back to work (a correction), and each leaves her recent half.
            let old = rows.filter { $0.driverID == alice && OrderQuery.finished.contains($0.status) && $0.updatedAt <= since }
            let recentOnes = before
            #expect(old.count >= 1 && recentOnes.count >= 2)
            try await store.write { [old, recentOnes] tx in
                func change(_ id: OrderID, _ edit: (inout Order) -> Void) throws {
                    var order = try #require(try tx.order(id, in: fixture.acme.id))
                    edit(&order)
                    order.updatedAt = t0 + 100
                    _ = try tx.updateOrder(order)
                }
                try change(old[0].id) { $0.notes = "signed copy received" }
                try change(recentOnes[0].id) { $0.driverID = bob }
                try change(recentOnes[1].id) { $0.status = .inProgress }
            }
            let after = try await expected()
            #expect(after.map(\.id).contains(old[0].id))
            #expect(!after.map(\.id).contains(recentOnes[0].id) && !after.map(\.id).contains(recentOnes[1].id))
            #expect(try await all(recent) == after)
            // Bob's half has the order he was given.
            let bobs = try await all(OrderQuery(driver: bob, statuses: [.cancelled, .completed], updatedAfter: since))
            #expect(bobs.map(\.id).contains(recentOnes[0].id))
        }
    }

    /// Active and finished statuses with a moment: every matching row, on either side. Only a
    /// finished-only query says the finished orders' predicate (`OrderQuery.isRecentlyFinished(now:)`).
    @Test(arguments: Backend.allCases) func aMomentWithActiveStatusesKeepsTheirRows(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let rows = try await Self.insert(
                18, in: fixture.acme.id, prefix: "M", statuses: [.new, .assigned, .completed],
                drivers: [fixture.alice.id], updatedAt: { t0 + Double($0) }, into: store)
            let newest = Array(rows.reversed())
            let mixed = try await store.read { tx in
                try tx.orderPage(in: fixture.acme.id, OrderQuery(statuses: [.new, .completed], updatedAfter: t0 + 5)).rows
            }
            #expect(mixed == newest.filter { ($0.status == .new || $0.status == .completed) && $0.updatedAt > t0 + 5 })
            let activeLately = try await store.read { tx in
                try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.alice.id, activeOnly: true, updatedAfter: t0 + 5)).rows
            }
            #expect(activeLately == newest.filter { $0.status != .completed && $0.updatedAt > t0 + 5 })
            #expect(!mixed.isEmpty && !activeLately.isEmpty)
        }
    }

    @Test(arguments: Backend.allCases) func aTextPageReadsAtMostItsWindowAndPointsPastIt(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let rows = try await Self.insert(
                12, in: fixture.acme.id, prefix: "W", title: { $0 % 4 == 0 ? "Match \($0)" : "Other \($0)" }, into: store)
            var query = OrderQuery(text: "match", limit: 10)
            query.textWindow = 5
            let pages = try await Self.allPages(store, in: fixture.acme.id, query)
            // 12…8, then 7…3, then 2…1: each page read five orders at most; short pages still lead on.
            #expect(pages.map { $0.map(\.title) } == [["Match 12", "Match 8"], ["Match 4"], []])
            let first = try await store.read { [query] tx in try tx.orderPage(in: fixture.acme.id, query) }
            #expect(first.next == rows[7].id)  // the window's last order ("Other 8" is index 7 → id of order 8)
            #expect(try await Self.allPages(store, in: fixture.acme.id, OrderQuery(text: "match", limit: 1)).flatMap { $0 }.count == 3)
        }
    }

    /// A driver's search counts its window among the driver's own orders, so a short page's `next`
    /// cursor (the window's end) is always one of theirs, never another driver's order id.
    @Test(arguments: Backend.allCases) func aDriversTextPageNeverPointsAtAnotherDriversOrder(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let rows = try await Self.insert(
                24, in: fixture.acme.id, prefix: "D", drivers: [fixture.alice.id, fixture.bob.id],
                title: { $0 % 6 == 0 ? "Match \($0)" : "Other \($0)" }, into: store)
            let alices = Set(rows.filter { $0.driverID == fixture.alice.id }.map(\.id))
            var query = OrderQuery(driver: fixture.alice.id, text: "match", limit: 10)
            query.textWindow = 3
            var cursors: [OrderID] = []
            let pages = try await Self.allPages(store, in: fixture.acme.id, query) { _ in }
            var next = query
            for _ in pages.indices {
                let page = try await store.read { [next] tx in try tx.orderPage(in: fixture.acme.id, next) }
                guard let cursor = page.next else { break }
                cursors.append(cursor)
                next.before = cursor
            }
            #expect(!cursors.isEmpty)
            #expect(cursors.allSatisfy { alices.contains($0) }, "\(cursors)")
            // Every match of hers, newest first, and only hers.
            let matches = rows.filter { $0.driverID == fixture.alice.id && $0.title.hasPrefix("Match") }
            #expect(pages.flatMap { $0 }.map(\.id) == matches.map(\.id).reversed())
        }
    }

    @Test(arguments: Backend.allCases) func idsReturnOnlyVisibleExistingOrders(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let acme = try await Self.insert(
                6, in: fixture.acme.id, prefix: "I", drivers: [fixture.alice.id, fixture.bob.id], into: store)
            let globex = try await Self.insert(2, in: fixture.globex.id, prefix: "I", into: store)
            try await store.write { tx in try tx.deleteOrder(acme[0].id, in: fixture.acme.id) }
            let asked = [acme[0].id, acme[1].id, acme[2].id, acme[3].id, globex[0].id, OrderID(999_999)]
            let (all, alices, none) = try await store.read { tx in
                (
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(ids: asked)),
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(driver: fixture.alice.id, ids: asked)),
                    try tx.orderPage(in: fixture.acme.id, OrderQuery(ids: []))
                )
            }
            #expect(all.rows == [acme[3], acme[2], acme[1]] && !all.hasMore)
            #expect(alices.rows == [acme[3], acme[1]].filter { $0.driverID == fixture.alice.id })
            #expect(alices.rows.allSatisfy { $0.driverID == fixture.alice.id } && !alices.rows.isEmpty)
            #expect(none == .empty)
        }
    }

    @Test(arguments: Backend.allCases) func countsPerStatusPerCompanyAndDriver(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            _ = try await Self.insert(
                7, in: fixture.acme.id, prefix: "C", statuses: [.new, .completed, .completed],
                drivers: [fixture.alice.id, nil], into: store)
            _ = try await Self.insert(5, in: fixture.globex.id, prefix: "C", statuses: [.cancelled], into: store)
            let (acme, alice, bob) = try await store.read { tx in
                (
                    try tx.orderCounts(in: fixture.acme.id, driver: nil),
                    try tx.orderCounts(in: fixture.acme.id, driver: fixture.alice.id),
                    try tx.orderCounts(in: fixture.acme.id, driver: fixture.bob.id)
                )
            }
            // index % 3: 1→completed, 2→completed, 0→new; index % 2: 0→alice, 1→nil.
            #expect(acme == [.new: 2, .completed: 5])
            #expect(alice == [.new: 1, .completed: 2])
            #expect(bob == [:])
        }
    }

    /// The counts are kept in each write's transaction (migration 0016), not counted at each read:
    /// after status changes, reassignments, unassignments, deletes and inserts, in batches and
    /// alone, and one write that failed and rolled back, they equal a count of the rows.
    @Test(arguments: Backend.allCases) func countsFollowEveryKindOfChange(_ backend: Backend) async throws {
        try await withStore(backend) { store in
            let fixture = try await Fixture.seed(store)
            let (acme, alice, bob) = (fixture.acme.id, fixture.alice.id, fixture.bob.id)
            let drivers: [UserID?] = [alice, bob, nil]
            let statuses = OrderStatus.allCases
            var ids = try await Self.insert(
                12, in: acme, prefix: "K", statuses: statuses, drivers: drivers, into: store
            ).map(\.id)
            _ = try await Self.insert(3, in: fixture.globex.id, prefix: "K", statuses: [.completed], into: store)
            func counted(_ driver: UserID?) async throws -> [OrderStatus: Int] {
                let rows = try await store.read { tx in try tx.orderPage(in: acme, OrderQuery(limit: 500)).rows }
                var counts: [OrderStatus: Int] = [:]
                for row in rows where driver == nil || row.driverID == driver { counts[row.status, default: 0] += 1 }
                return counts
            }
            func expectCountsMatch(_ step: String) async throws {
                for driver in [nil, alice, bob] {
                    let kept = try await store.read { tx in try tx.orderCounts(in: acme, driver: driver) }
                    #expect(kept == (try await counted(driver)), "\(step), driver \(String(describing: driver))")
                }
            }
            try await expectCountsMatch("inserted")
            // Deterministic walk: each step changes one order's status, driver, both, or neither
            // (notes only), or deletes one, or inserts one; every fourth step is a batch of three.
            var state: UInt64 = 42
            func next(_ bound: Int) -> Int {
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return Int((state >> 33) % UInt64(bound))
            }
            for step in 0..<24 {
                let batch = step % 4 == 3 ? 3 : 1
                let picks = (0..<batch).map { _ in (next(6), next(max(ids.count, 1)), next(statuses.count), next(drivers.count)) }
                let (deleted, inserted) = try await store.write { [ids] tx in
                    var deleted: [OrderID] = []
                    var inserted: [OrderID] = []
                    for (kind, index, status, driver) in picks {
                        let id = ids[index]
                        guard !deleted.contains(id), var order = try tx.order(id, in: acme) else { continue }
                        switch kind {
                        case 0: order.status = statuses[status]
                        case 1: order.driverID = drivers[driver]
                        case 2: (order.status, order.driverID) = (statuses[status], drivers[driver])
                        case 3: order.notes = "step \(step)"
                        case 4:
                            try tx.deleteOrder(id, in: acme)
                            deleted.append(id)
                            continue
                        default:
                            let new = sampleOrder(
                                in: acme, number: "K-new-\(step)-\(index)", driver: drivers[driver], status: statuses[status])
                            inserted.append(try tx.insertOrder(new).id!)
                            continue
                        }
                        order.version += 1
                        _ = try tx.updateOrder(order)
                    }
                    return (deleted, inserted)
                }
                ids = ids.filter { !deleted.contains($0) } + inserted
                try await expectCountsMatch("step \(step)")
            }
            // A write that fails after changing a status and creating an order leaves the counts as
            // they were. (The insert reaches the database at once on either store, and the read
            // after it makes the PostgreSQL store send the update it holds back for the commit.)
            let before = try await store.read { tx in try tx.orderCounts(in: acme, driver: nil) }
            await #expect(throws: StoreError.self) {
                try await store.write { [ids] tx in
                    var order = try #require(try tx.order(ids[0], in: acme))
                    order.status = order.status == .cancelled ? .completed : .cancelled
                    order.version += 1
                    _ = try tx.updateOrder(order)
                    _ = try tx.insertOrder(sampleOrder(in: acme, number: "K-lost", driver: alice, status: .new))
                    _ = try tx.orderPage(in: acme, OrderQuery(limit: 500))
                    throw StoreError.conflict("given up on purpose")
                }
            }
            #expect(try await store.read { tx in try tx.orderCounts(in: acme, driver: nil) } == before)
            try await expectCountsMatch("after the rollback")
            // The other company's counts never moved.
            #expect(try await store.read { tx in try tx.orderCounts(in: fixture.globex.id, driver: nil) } == [.completed: 3])
        }
    }
}
