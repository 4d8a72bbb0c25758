import Foundation
import Testing
import WaybillDomain
import WaybillPostgres
import WaybillStorage
import WaybillTesting
import WaybillStoreTesting

@Suite(.timeLimit(.minutes(2))) struct PostgresCommitOrderTests {
    /// Two stores (two nodes) write concurrently while a reader follows the outbox by cursor: it
    /// must never see id k+1 before k (it would skip k for good), and the ids must end dense.
    @Test func aReaderFollowingTheOutboxNeverSeesAGap() async throws {
        let url = try await freshDatabase()
        let nodeA = try await openStore(url, name: "node-a", writers: 4)
        let nodeB = try await openStore(url, name: "node-b", writers: 4)
        defer {
            nodeA.close()
            nodeB.close()
        }
        let order = try await seedOrder(nodeA)
        // One order per task: the tasks contend only for the event counter, as writes of
        // different orders do.
        let orders = try await nodeA.write { tx in
            try (0..<8).map { index in
                var copy = order
                copy.id = nil
                copy.number = "task-\(index)"
                return try tx.insertOrder(copy)
            }
        }
        let writesPerTask = 30, tasks = 8
        let expected = Int64(writesPerTask * tasks * 3 / 2)  // every other write appends two events
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                let store = task.isMultiple(of: 2) ? nodeA : nodeB
                let order = orders[task]
                group.addTask {
                    for index in 0..<writesPerTask {
                        let count = index.isMultiple(of: 2) ? 1 : 2
                        _ = try await store.write { tx in
                            // Some work before the counter, as a real write does.
                            _ = try tx.order(order.id!, in: order.companyID)
                            return try tx.appendEvents(Array(repeating: createdEvent(order), count: count))
                        }
                    }
                }
            }
            group.addTask {
                var cursor: Int64 = 0
                var gaps: [String] = []
                let deadline = ContinuousClock.now + .seconds(90)
                while cursor < expected && ContinuousClock.now < deadline {
                    let after = EventID(cursor)
                    let ids = try await nodeB.read { tx in try tx.events(after: after, limit: 50).map(\.id.rawValue) }
                    for id in ids {
                        if id != cursor + 1 { gaps.append("after \(cursor) came \(id)") }
                        cursor = id
                    }
                }
                #expect(cursor == expected)
                #expect(gaps == [])
            }
            try await group.waitForAll()
        }
        let all = try await nodeA.read { tx in try tx.events(after: .zero, limit: 10_000).map(\.id.rawValue) }
        #expect(all == Array(1...expected))
    }
}
