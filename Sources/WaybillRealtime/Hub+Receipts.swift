public import Foundation
public import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

extension Hub {
    /// How drivers' `seen` receipts are written (SPEC §2 "Receipts", §4).
    public struct Receipts: Sendable {
        /// At most one store write per driver per `interval` (SPEC §4 asks it per socket; a driver's
        /// sockets share one pace, so opening more sockets does not buy more writes).
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

    /// One driver's receipts: one coalescer for all the driver's sockets, so a driver writes at
    /// most once per `interval` however many sockets it opens (or opens and closes in a loop).
    struct DriverReceipts {
        var coalescer: ReceiptCoalescer
        var company: CompanyID
        /// The driver's admitted sockets now.
        var sockets = 0
        /// A check is scheduled to drop this entry once it is idle (see `released`).
        var isReleaseScheduled = false
    }

    /// A driver socket was admitted: it may report receipts, for orders of `company` only.
    func acceptReceipts(on socket: SocketID, company: CompanyID) {
        guard let driver = connections[socket]?.machine.userID else { return }
        connections[socket]?.company = company
        driverReceipts[driver, default: DriverReceipts(coalescer: ReceiptCoalescer(interval: receipts.interval), company: company)]
            .sockets += 1
    }

    /// A `seen` frame: recorded now, or after the socket's replay (`ConnectionMachine.seen`).
    func received(_ reports: [SeenReport], on socket: SocketID) {
        guard connections[socket]?.machine.seen(reports) == .record else { return }
        record(reports, on: socket)
    }

    /// Receipts of a socket to record. Only driver sockets' count (a dispatcher's are ignored);
    /// the store keeps only receipts for the driver's own orders, at or below their current version.
    func record(_ reports: [SeenReport], on socket: SocketID) {
        guard connections[socket]?.company != nil, let driver = connections[socket]?.machine.userID,
            let action = driverReceipts[driver]?.coalescer.received(reports, at: elapsed())
        else { return }
        perform(action, for: driver)
    }

    /// A driver socket closed. What its driver reported still gets written by the driver's
    /// coalescer, a second after the previous write at the earliest (the device may have closed
    /// right after sending `seen`); the coalescer stays while it has work, and a second after.
    func receiptsClosed(_ entry: Entry) {
        guard entry.company != nil, let driver = entry.machine.userID, driverReceipts[driver] != nil else { return }
        driverReceipts[driver]?.sockets -= 1
        released(driver)
    }

    /// Drops a driver's entry once no socket of theirs is open and it has nothing to do, but not
    /// before `interval` has passed: a driver that closes and reopens keeps its pace.
    private func released(_ driver: UserID) {
        guard let state = driverReceipts[driver], state.sockets <= 0, !state.isReleaseScheduled else { return }
        if state.coalescer.isIdle && !state.coalescer.isWithinInterval(at: elapsed()) {
            driverReceipts[driver] = nil
            return
        }
        driverReceipts[driver]?.isReleaseScheduled = true
        let clock = receipts.clock, interval = receipts.interval
        Task {
            try? await clock.sleep(for: interval)
            self.executeSurely { _ in
                self.driverReceipts[driver]?.isReleaseScheduled = false
                self.released(driver)
            }
        }
    }

    private func perform(_ action: ReceiptCoalescer.Action, for driver: UserID) {
        switch action {
        case .none:
            return
        case .wake(let wait):
            let clock = receipts.clock
            Task {
                try? await clock.sleep(for: wait)
                self.executeSurely { _ in
                    guard let next = self.driverReceipts[driver]?.coalescer.woke(at: self.elapsed()) else { return }
                    self.perform(next, for: driver)
                }
            }
        case .write(let reports):
            guard let company = driverReceipts[driver]?.company else { return }
            // Stamped now, on the service thread, when the coalescer let the write begin: so stamps of one
            // driver's writes are at least `interval` apart, whenever the task gets a thread.
            let decidedAt = receipts.now()
            Task {
                let committed = await self.write(reports, driver: driver, company: company, at: decidedAt)
                self.executeSurely { _ in
                    let keepTrying = (self.driverReceipts[driver]?.sockets ?? 0) > 0
                    guard
                        let next = self.driverReceipts[driver]?.coalescer.written(
                            at: self.elapsed(), failed: committed ? [] : reports, keepTrying: keepTrying)
                    else { return }
                    self.perform(next, for: driver)
                }
            }
        }
    }

    /// History rewound: every driver's waiting receipts name the old history's versions.
    func receiptsRewound() {
        for driver in driverReceipts.keys { driverReceipts[driver]?.coalescer.historyRewound() }
    }

    /// One store write for a driver's receipts, off the service thread; whether it committed. A
    /// failure goes back to the driver's coalescer, which tries again with a backoff: until it
    /// commits while the driver has a socket here, else a few times (`ReceiptCoalescer`). Recording is idempotent: a retry of a write that did commit (its
    /// outcome unknown) records nothing new.
    private func write(_ reports: [SeenReport], driver: UserID, company: CompanyID, at now: Date) async -> Bool {
        do {
            // The events are appended as the last step before commit (docs/DESIGN.md, "Event ids").
            // Through the orders' turns (`OrderStore.write(changing:in:appendingEvents:)`): on
            // PostgreSQL it waits without a writer while another write of one of them runs on this
            // node, and is refused at once while one of them is paused for a lock timeout (then the
            // coalescer tries again later, for every order of the batch). The turns are the
            // driver's company's: ids of another company's orders in a `seen` frame take none of
            // that company's turns (the store then finds no such order of the driver's).
            let (_, events) = try await store.write(changing: reports.map(\.orderID), in: company, appendingEvents: { tx in
                ((), try Self.recordReceipts(reports, driver: driver, company: company, at: now, in: tx))
            })
            if !events.isEmpty { receipts.committed(events) }
            return true
        } catch {
            logger.warning("receipts not recorded; tried again later", ["driver": "\(driver)", "error": "\(error)"])
            return false
        }
    }

    /// Records each receipt the store accepts, in the caller's transaction, and returns the
    /// `order_seen` events to append in it (the receipts and their events commit together).
    static func recordReceipts(
        _ reports: [SeenReport], driver: UserID, company: CompanyID, at now: Date, in tx: any StoreWriter
    ) throws -> [OrderEvent] {
        var events: [OrderEvent] = []
        for report in reports {
            guard
                let summary = try tx.recordSeen(
                    report.orderID, version: report.version, by: driver, in: company, at: now)
            else { continue }
            events += Broadcaster.events(for: .seen(summary, company: company), at: now)
        }
        return events
    }
}
