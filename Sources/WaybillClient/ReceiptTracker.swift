/// Which order versions this device has reported showing on the current socket (SPEC §5 rule 7).
///
/// The server records the newest version the driver's device showed (`seen` on the order) and tells the
/// dispatchers. The tracker sends each shown version once per connection: a version already reported on
/// this socket is not sent again, and a new socket starts empty, because the receipt may have been lost
/// with the old one (the server ignores versions it already has).
struct ReceiptTracker: Sendable {
    /// One `{"id":42,"version":5}` entry of a `seen` frame.
    struct Receipt: Hashable, Sendable, Comparable {
        var order: OrderID
        var version: Int64
        static func < (lhs: Self, rhs: Self) -> Bool { (lhs.order, lhs.version) < (rhs.order, rhs.version) }
    }

    private var reported: [OrderID: Int64] = [:]

    /// A new socket went live: nothing is reported on it yet.
    mutating func connectionOpened() { reported = [:] }

    /// The entries of `shown` (order → version on screen) not yet reported on this socket, sorted by order;
    /// they count as reported from now on.
    mutating func unreported(_ shown: [OrderID: Int64]) -> [Receipt] {
        var receipts: [Receipt] = []
        for (order, version) in shown where reported[order] != version {
            reported[order] = version
            receipts.append(Receipt(order: order, version: version))
        }
        return receipts.sorted()
    }

    /// Entries per `seen` frame. Servers refuse client frames over 4 KiB (1009: they only expect pings
    /// and receipts); 64 entries of the longest possible ids and versions stay under 3.8 KiB. Without a
    /// bound, a long list would close the socket, and the reconnect would send the same frame again.
    static let maxEntriesPerFrame = 64

    /// The `{"type":"seen","orders":[…]}` frames for `receipts`, at most ``maxEntriesPerFrame`` entries each.
    static func frames(_ receipts: [Receipt]) -> [String] {
        stride(from: 0, to: receipts.count, by: maxEntriesPerFrame).map { start in
            let chunk = receipts[start..<min(start + maxEntriesPerFrame, receipts.count)]
            let entries = chunk.map { #"{"id":\#($0.order.rawValue),"version":\#($0.version)}"# }
            return #"{"type":"seen","orders":["# + entries.joined(separator: ",") + "]}"
        }
    }
}
