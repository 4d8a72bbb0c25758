public import Foundation
public import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

extension Hub {
    /// How drivers' `seen` receipts are written (SPEC §2 "Receipts", §4).
    public struct Receipts: Sendable {
        /// At most one store write per driver socket per `interval`.
        public var interval: Duration
        /// Sleeps until the next write of a socket may begin.
        public var clock: any Clock<Duration>
        /// The time a receipt is recorded with (`seen.at`).
        public var now: @Sendable () -> Date
        /// Called after each commit with its `order_seen` events (pokes the relay; never blocks).
        public var committed: @Sendable ([StoredEvent]) -> Void

        public init(
            interval: Duration = .seconds(1), clock: any Clock<Duration> = ContinuousClock(),
            now: @escaping @Sendable () -> Date = { Date() },
            committed: @escaping @Sendable ([StoredEvent]) -> Void = { _ in }
        ) {
            self.interval = interval
            self.clock = clock
            self.now = now
            self.committed = committed
        }
    }

    /// A driver socket was admitted: it may report receipts, for orders of `company` only.
    func acceptReceipts(on socket: SocketID, company: CompanyID) {
        connections[socket]?.company = company
        connections[socket]?.receipts = ReceiptCoalescer(interval: receipts.interval)
    }

    /// A `seen` frame. Only driver sockets' count (a dispatcher's are ignored); the store keeps
    /// only receipts for the driver's own orders, at or below their current version.
    func received(_ reports: [SeenReport], on socket: SocketID) {
        guard connections[socket]?.receipts != nil,
            let action = connections[socket]?.receipts?.received(reports, at: elapsed())
        else { return }
        perform(action, on: socket)
    }

    /// A driver socket closed: what it reported last still gets written, a second after its
    /// previous write at the earliest (the device may have closed right after sending `seen`).
    func receiptsClosed(_ entry: Entry) {
        guard var coalescer = entry.receipts, let driver = entry.machine.userID, let company = entry.company,
            let (reports, wait) = coalescer.closed(at: elapsed())
        else { return }
        let clock = receipts.clock
        Task {
            if wait > .zero { try? await clock.sleep(for: wait) }
            await self.write(reports, driver: driver, company: company, at: self.receipts.now())
        }
    }

    private func perform(_ action: ReceiptCoalescer.Action, on socket: SocketID) {
        switch action {
        case .none:
            return
        case .wake(let wait):
            let clock = receipts.clock
            Task {
                try? await clock.sleep(for: wait)
                self.execute { _ in
                    guard let next = self.connections[socket]?.receipts?.woke(at: self.elapsed()) else { return }
                    self.perform(next, on: socket)
                }
            }
        case .write(let reports):
            guard let driver = connections[socket]?.machine.userID, let company = connections[socket]?.company else {
                return
            }
            // Stamped now, on the service thread, when the coalescer let the write begin: so stamps of one
            // socket's writes are at least `interval` apart, whenever the task gets a thread.
            let decidedAt = receipts.now()
            Task {
                await self.write(reports, driver: driver, company: company, at: decidedAt)
                self.execute { _ in
                    guard let next = self.connections[socket]?.receipts?.written(at: self.elapsed()) else { return }
                    self.perform(next, on: socket)
                }
            }
        }
    }

    /// One store write for a socket's receipts, off the service thread. A failure drops them: the
    /// device reports what it shows again after its next fetch, and a receipt is never worth a retry loop.
    private func write(_ reports: [SeenReport], driver: UserID, company: CompanyID, at now: Date) async {
        do {
            let events = try await store.write { tx in
                try Self.recordReceipts(reports, driver: driver, company: company, at: now, in: tx)
            }
            if !events.isEmpty { receipts.committed(events) }
        } catch {
            logger.warning("receipts not recorded", ["driver": "\(driver)", "error": "\(error)"])
        }
    }

    /// Records each receipt the store accepts and appends its `order_seen` event, in the caller's
    /// transaction (the receipts and their events commit together).
    static func recordReceipts(
        _ reports: [SeenReport], driver: UserID, company: CompanyID, at now: Date, in tx: any StoreWriter
    ) throws -> [StoredEvent] {
        var events: [OrderEvent] = []
        for report in reports {
            guard
                let summary = try tx.recordSeen(
                    report.orderID, version: report.version, by: driver, in: company, at: now)
            else { continue }
            events += Broadcaster.events(for: .seen(summary, company: company), at: now)
        }
        // Last step before commit: ids are taken in commit order (docs/DESIGN.md, "Event ids").
        return try tx.appendEvents(events)
    }
}
