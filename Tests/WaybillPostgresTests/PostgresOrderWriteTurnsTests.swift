import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

/// A row lock held for long (here by another node's open transaction; in the field by a node cut
/// off from the database, whose transaction PostgreSQL ends only when it finds the peer gone)
/// holds up the writes to that order only: they wait for their turn without a writer connection
/// (`write(changing:appendingEvents:)`), and a write to another order goes through at once. Before,
/// four writes to the locked order took all four writers for their lock timeout (2 s), and every
/// write of the node waited (`scripts/bench.sh cluster paced 1000 20 node2-cut`).
@Suite(.timeLimit(.minutes(2))) struct PostgresOrderWriteTurnsTests {
    @Test func writesWaitingForALockedOrderLeaveTheWritersToOtherOrders() async throws {
        let url = try await freshDatabase()
        let node = try await openStore(url, name: "node", writers: 4)
        let other = try await openStore(url, name: "other-node", writers: 1)
        defer {
            node.close()
            other.close()
        }
        let locked = try await seedOrder(node)
        let free = try await node.write { tx in
            var copy = locked
            copy.id = nil
            copy.number = "2026/11/0002"
            return try tx.insertOrder(copy)
        }
        // The other node locks the order's row and keeps its transaction open for 3 s.
        let holding = Task {
            try await other.write { tx in
                _ = try tx.order(locked.id!, in: locked.companyID)
                Thread.sleep(forTimeInterval: 3)
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        @Sendable func change(_ order: Order) async throws -> (Duration, Result<Order, any Error>) {
            await timed {
                try await node.write(changing: order.id!) { tx in
                    var current = try #require(try tx.order(order.id!, in: order.companyID))
                    current.notes += "x"
                    current.version += 1
                    return (try tx.updateOrder(current), [OrderEvent]())
                }.0
            }
        }
        let waiting = (0..<6).map { _ in Task { try await change(locked) } }
        try await Task.sleep(for: .milliseconds(200))  // every one of them asked before the next write
        let (elapsed, result) = try await change(free)
        #expect(throws: Never.self) { try result.get() }
        #expect(elapsed < .seconds(1), "a write to another order waits for no locked one: \(elapsed)")
        try await holding.value
        // The writes to the locked order end within their budget: committed in turn, or refused
        // as unavailable (the first in turn meets the lock's 2 s timeout while the lock is held).
        var committed = 0
        for task in waiting {
            let (elapsed, result) = try await task.value
            #expect(elapsed < .seconds(31))
            if case .success = result { committed += 1 } else { #expect(isUnavailable(result)) }
        }
        #expect(committed >= 4)
        let final = try #require(try await node.read { tx in try tx.order(locked.id!, in: locked.companyID) })
        #expect(final.notes.count - locked.notes.count == committed, "each committed once")
    }

    /// The wait for a turn counts in the call's budget: with the order locked past it, every write
    /// to the order is refused as unavailable within its budget (and a little), never later.
    @Test func theWaitForATurnCountsInTheCallsBudget() async throws {
        let url = try await freshDatabase()
        let node = try await openStore(url, name: "node", writers: 4, callBudget: .milliseconds(1500))
        let other = try await openStore(url, name: "other-node", writers: 1)
        defer {
            node.close()
            other.close()
        }
        let locked = try await seedOrder(node)
        let holding = Task {
            try await other.write { tx in
                _ = try tx.order(locked.id!, in: locked.companyID)
                Thread.sleep(forTimeInterval: 4)
            }
        }
        try await Task.sleep(for: .milliseconds(300))
        let waiting = (0..<6).map { _ in
            Task {
                await timed {
                    try await node.write(changing: locked.id!) { tx in
                        (try tx.order(locked.id!, in: locked.companyID), [OrderEvent]())
                    }.0
                }
            }
        }
        for task in waiting {
            let (elapsed, result) = await task.value
            #expect(isUnavailable(result))
            #expect(elapsed < .milliseconds(1500) + .seconds(1), "refused within the budget: \(elapsed)")
        }
        try await holding.value
    }
}
