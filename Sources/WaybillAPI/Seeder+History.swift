import Foundation
import WaybillDomain
import WaybillStorage

/// A company's past: completed and cancelled orders spread over the last six months, so a
/// realistic history (100 drivers × 1 000 orders) can be made in seconds.
///
/// Written straight to the store in transactions of `historyBatch` orders, without outbox
/// events: as if their events were pruned long ago (clients read state from the API, and an
/// event for an order finished months ago would only make every socket replay it).
extension Seeder {
    /// Orders per write transaction: small enough for PostgreSQL's 4.5 s call budget (each order is
    /// a few round trips; measured: 2 000 per transaction did not finish in time on a local
    /// server), and short for the writer while a server runs on the same store.
    static let historyBatch = 250
    /// The history spans this long, ending `historyGap` before now.
    static let historySpan: TimeInterval = 180 * 86_400
    static let historyGap: TimeInterval = 2 * 86_400

    func seedHistory(perDriver: Int, drivers: [UserID], company: CompanyID, now: Date) async throws {
        let total = perDriver * drivers.count
        guard total > 0 else { return }
        let start = now.addingTimeInterval(-Self.historySpan - Self.historyGap)
        let step = Self.historySpan / Double(total)
        var index = 0
        while index < total {
            let range = index..<min(total, index + Self.historyBatch)
            try await store.write { tx in
                for k in range {
                    // Interleaved drivers, oldest first: ids ascend with creation time.
                    let created = start.addingTimeInterval(Double(k) * step)
                    _ = try tx.insertOrder(
                        try Self.pastOrder(k, driver: drivers[k % drivers.count], company: company, created: created, in: tx))
                }
            }
            index = range.upperBound
        }
    }

    /// The `k`-th past order: one in seven cancelled, the rest completed a few hours after creation.
    private static func pastOrder(
        _ k: Int, driver: UserID, company: CompanyID, created: Date, in tx: any StoreWriter
    ) throws -> Order {
        let period = OrderNumber.period(of: created)
        let sequence = try tx.nextOrderSequence(company: company, year: period.year, month: period.month)
        let cancelled = k % 7 == 3
        let finished = created.addingTimeInterval(Double(2 + k % 6) * 3600)
        let depot = k % 5 + 1
        return Order(
            companyID: company, number: OrderNumber.format(year: period.year, month: period.month, sequence: sequence),
            status: cancelled ? .cancelled : .completed, driverID: driver,
            title: "Past delivery \(k + 1) from depot \(depot)", notes: cancelled ? "Cancelled by the customer" : "",
            stages: [
                Stage(position: 1, kind: .pickup, address: "Depot \(depot), Harbour Road",
                      completedAt: created.addingTimeInterval(3600)),
                Stage(position: 2, kind: .delivery, address: "\(10 + k % 90) Market Street",
                      completedAt: cancelled ? nil : finished),
            ],
            createdAt: created, updatedAt: finished, version: cancelled ? 4 : 6)
    }
}
