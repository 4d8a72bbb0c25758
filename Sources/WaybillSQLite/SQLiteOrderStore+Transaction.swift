import Foundation
import WaybillDomain
import WaybillStorage

extension SQLiteOrderStore {
    /// The handle a `read` or `write` closure receives: the store's operations on one connection,
    /// inside the transaction the store opened around the closure.
    ///
    /// Reads get it as `any StoreReader` on a `query_only` reader connection; writes as
    /// `any StoreWriter` on the writer connection. Used only on the thread running the closure,
    /// and refused once the closure returned (GRDB's rule: a handle never outlives its scope).
    /// Every operation translates `SQLiteError` into `StoreError`, so closures can catch
    /// `StoreError.conflict` and the like.
    final class Transaction: StoreWriter {
        let db: SQLiteConnection
        /// The time stamped on outbox events as `committed_at`.
        let clock: @Sendable () -> Date
        private var isActive = true
        /// Orders as this transaction last read or wrote them (`loadOrder`), so `updateOrder` can
        /// write only what changed without reading the row again.
        var loaded: [OrderID: Order] = [:]
        /// The receipt columns of the orders in `loaded`, as stored: `Order.seen` keeps only the
        /// receipt that counts for the driver it was read with, and `updateOrder` builds its answer
        /// for a new driver from these.
        var loadedReceipts: [OrderID: OrderReceipt.Columns] = [:]

        /// Stages and documents this transaction read, or kept at a new version, on the writer
        /// connection: `OrderPartsCache`'s entries once it commits.
        var partsSeen: [OrderID: OrderParts] = [:]
        /// Orders whose stages or documents this transaction wrote, or that it deleted: dropped
        /// from `OrderPartsCache` when it commits.
        var partsChanged: Set<OrderID> = []

        /// Notes `order`'s stages and documents as this transaction leaves them at its version, for
        /// `OrderPartsCache` (writer connection only).
        func keepParts(of order: Order, id: OrderID) {
            guard db.orderParts != nil else { return }
            partsSeen[id] = OrderParts(version: order.version, stages: order.stages, documents: order.documents)
        }

        /// Orders as stored that this transaction read, or left by an update of their row alone, on
        /// the writer connection: `OrderPartsCache`'s rows once it commits.
        var rowsSeen: [OrderID: CachedOrderRow] = [:]

        /// Notes `order` as stored now, with its receipt columns, for `OrderPartsCache`: kept at
        /// commit only if no later statement changed the row (writer connection only).
        func keepRow(_ order: Order, receipt: OrderReceipt.Columns, id: OrderID) {
            guard db.orderParts != nil, let writes = db.orderRowWrites else { return }
            rowsSeen[id] = CachedOrderRow(order: order, receipt: receipt, write: writes.last(of: id))
        }

        /// Tells the writer connection's `OrderPartsCache` what this transaction read and wrote;
        /// called only once it committed, leaving the file at data version `version`.
        func committed(version: UInt32?) {
            db.orderParts?.committed(version: version, seen: partsSeen, changed: partsChanged, rows: rowsSeen)
        }

        /// Events this transaction's closure appended, in id order: handed to the commit observer
        /// if the closure's work commits.
        var appended: [StoredEvent] = []

        init(db: SQLiteConnection, clock: @escaping @Sendable () -> Date) {
            self.db = db
            self.clock = clock
        }

        /// Called by the store when the closure returned: later use throws.
        func end() { isActive = false }

        /// Runs one store operation, translating SQLite failures at the protocol boundary.
        func perform<T>(_ operation: () throws(SQLiteError) -> T) throws(StoreError) -> T {
            guard isActive else {
                throw .unavailable("a store transaction was used after its closure returned")
            }
            // After some errors (disk full, I/O) SQLite rolls the whole transaction back; a
            // closure that caught the error must not go on writing in autocommit mode.
            guard db.isInTransaction else {
                throw .unavailable("the transaction was rolled back after an earlier error")
            }
            do throws(SQLiteError) {
                return try operation()
            } catch {
                throw error.storeError
            }
        }
    }
}
