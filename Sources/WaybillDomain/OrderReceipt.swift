public import Foundation

/// A read receipt (SPEC §2, "Receipts"): the newest version of an order that its assigned
/// driver's device reported showing, and when the server recorded it.
///
/// Stored on the order row with the driver it came from. A receipt counts only while that driver
/// is still the order's driver: after a reassignment the new driver has seen nothing yet, so the
/// old driver's receipt reads as `nil` (it is kept, not cleared, so reassigning back to the same
/// driver shows what that driver really saw — an older version, so "not seen yet" — unless the
/// driver in between reported: one receipt per order, the last reporter's).
public struct OrderReceipt: Sendable, Equatable {
    public var driverID: UserID
    /// The order version the device showed (never above the order's version at the time).
    public var version: Int
    /// When the server recorded it (not the device's clock).
    public var at: Date

    public init(driverID: UserID, version: Int, at: Date) {
        self.driverID = driverID
        self.version = version
        self.at = at
    }

    /// The receipt as stored columns give it, if it counts for an order whose driver is
    /// `assignedTo`: `nil` when none was stored or it came from another driver.
    public static func stored(driverID: Int64?, version: Int?, at: Date?, assignedTo: UserID?) -> OrderReceipt? {
        guard let driverID, let version, let at, let assignedTo, assignedTo.rawValue == driverID else { return nil }
        return OrderReceipt(driverID: assignedTo, version: version, at: at)
    }
}

extension OrderReceipt {
    /// The receipt columns of an order row as stored: the receipt of whichever driver sent it.
    /// `Order.seen` keeps only the one that counts for the driver the order was read with, so the
    /// stores keep these beside an order a write transaction read, and an update that changes the
    /// driver tells from them what `seen` becomes without reading the row again.
    public struct Columns: Sendable, Equatable {
        public var driverID: Int64?
        public var version: Int?
        public var at: Date?

        public init(driverID: Int64?, version: Int?, at: Date?) {
            self.driverID = driverID
            self.version = version
            self.at = at
        }

        /// The receipt these columns give an order whose driver is `driver` (`OrderReceipt.stored`).
        public func receipt(assignedTo driver: UserID?) -> OrderReceipt? {
            OrderReceipt.stored(driverID: driverID, version: version, at: at, assignedTo: driver)
        }
    }
}

/// One entry of a driver's `seen` frame: "my device shows version `version` of order `orderID`".
public struct SeenReport: Sendable, Hashable {
    public var orderID: OrderID
    public var version: Int

    public init(orderID: OrderID, version: Int) {
        self.orderID = orderID
        self.version = version
    }
}
