import WaybillDomain

/// An order's stages and documents as committed at one version: what a write reads to answer
/// with the whole order, though most writes (a status, a driver, the notes) change neither.
struct OrderParts: Equatable {
    let version: Int
    let stages: [Stage]
    let documents: [Document]
}

/// An order's row as this connection last committed or read it: the whole order (with its stages
/// and documents) and the receipt columns `Order.seen` is built from, so that a write reads no
/// statement at all for it (`OrderPartsCache.row`).
///
/// A class: entries pass it around without copying the order's fields (a copy of an `Order` is
/// a dozen retains, and the cache's bookkeeping is on every write).
final class CachedOrderRow {
    let order: Order
    let receipt: OrderReceipt.Columns
    /// `OrderRowWrites.last(of:)` when it was noted: which write to the row it shows (0: none of
    /// the transaction's).
    let write: Int

    init(order: Order, receipt: OrderReceipt.Columns, write: Int) {
        self.order = order
        self.receipt = receipt
        self.write = write
    }

    /// About what it holds besides the parts: its text, and 64 bytes.
    var size: Int { 64 + order.number.utf8.count + order.title.utf8.count + order.notes.utf8.count }

    var version: Int { order.version }
}

/// Every change to an `orders` row on the writer connection, reported by SQLite's update hook
/// (`SQLiteConnection.trackOrderRowWrites`): what a cached row is checked against, so that a
/// statement that changes a row (a receipt, a delete, one added later) cannot leave a stale row in
/// `OrderPartsCache` by not telling it. The hook misses what SQLite does not report (its
/// documentation): rows deleted by a conflict's `REPLACE`, and a table emptied by `DELETE` without
/// `WHERE` (which foreign keys turn off here). Neither may be used on `orders`. Numbered, so that
/// of two notes of one row in a batch only the one after its last write counts. Kept from one
/// `BEGIN` to the next (`OrderPartsCache.began`). Used only where its connection is.
final class OrderRowWrites {
    private(set) var last: [Int64: Int] = [:]
    private var sequence = 0

    func touched(_ rowid: Int64) {
        sequence += 1
        last[rowid] = sequence
    }

    /// The number of the last write to order `id` since the transaction began; 0 if none.
    func last(of id: OrderID) -> Int { last[id.rawValue] ?? 0 }

    /// Keeps the table's room for the usual batch, not for a rare large one.
    func reset() { if !last.isEmpty { last.removeAll(keepingCapacity: last.count <= 64) } }
}

/// The stages and documents of recently written orders, by order and version, so that a write
/// reads the order's row only: two of the three statements of its read (about 4 % of the
/// server's CPU at 1 000 writes/s; docs/BENCHMARKS.md, 2026-12-06 04:55). And, for an order whose
/// row no statement has changed since this connection committed or read it, the row too, so that
/// the write reads nothing (docs/BENCHMARKS.md, 2026-12-06 07:23).
///
/// Correct because an order's version moves with every change to its stages or documents (the
/// domain's transitions bump it, and the `If-Match` tags of SPEC §2 rest on that), so the parts
/// of one committed version never change, and a row read at another version misses. Entries come
/// only from transactions that committed (a write that rolled back may have read or made parts of
/// a version that never existed), and an order whose stages or documents a transaction may have
/// written, or that it deleted, is dropped at its commit rather than kept. Only this connection's
/// own commits are trusted: when the file's data version at `BEGIN` is not the one its last commit
/// left, something else wrote the file (another process; a backup restored under the running
/// server, which brings back ids and versions with other content; an older build that wrote stages
/// without a new version), and the cache starts over, as `NewestEventCache` does.
///
/// A row is known only from this connection's own commits and reads, and only while no statement
/// has changed it since: SQLite reports every change to an `orders` row on the connection
/// (`OrderRowWrites`), so a row noted before a later change in its batch is not kept, and one
/// changed by a statement that noted nothing (a receipt) is dropped at the next `BEGIN`. Other
/// connections' writes are the data version's, as above.
///
/// Owned by the writer connection and used only where that connection is (the writer thread, or
/// the service thread inline, never both at once). Bounded by count and by size: full, it starts
/// over, and an order whose parts are large is not kept.
struct OrderPartsCache {
    private struct Entry {
        var parts: OrderParts
        var partsBytes: Int
        var row: CachedOrderRow?
        var rowBytes = 0
        var bytes: Int { partsBytes + rowBytes }
    }
    private var entries: [OrderID: Entry] = [:]
    private var bytes = 0
    /// The data version this connection's last commit left; nil: nothing is trusted.
    private var version: UInt32?
    /// Reads of parts it answered, and of whole orders (tests).
    private(set) var hits = 0
    private(set) var rowHits = 0

    /// Entries kept at most, their size in all, and the size of one (text bytes, plus a fixed
    /// allowance per stage and document).
    static let capacity = 4096
    static let byteCapacity = 8 << 20
    static let largestEntry = 32 << 10

    /// A write transaction began; `version` is the file's data version now. `writes`: the rows
    /// changed since the last `BEGIN` (committed or rolled back since): a row kept from before
    /// any of them is dropped, and the count starts over. Without it no row can be checked, and
    /// none is kept.
    mutating func began(version: UInt32?, writes: OrderRowWrites?) {
        if version == nil || version != self.version {
            if !entries.isEmpty { forget() }
        } else if let writes {
            for (rowid, write) in writes.last {
                guard let index = entries.index(forKey: OrderID(rowid)), let row = entries.values[index].row,
                    row.write != write
                else { continue }
                dropRow(at: index)
            }
        } else {
            for index in entries.indices where entries.values[index].row != nil { dropRow(at: index) }
        }
        writes?.reset()
    }

    private mutating func dropRow(at index: Dictionary<OrderID, Entry>.Index) {
        bytes -= entries.values[index].rowBytes
        entries.values[index].row = nil
        entries.values[index].rowBytes = 0
    }

    /// The parts of order `id` at `version`, if known.
    mutating func parts(of id: OrderID, at version: Int) -> OrderParts? {
        guard let entry = entries[id], entry.parts.version == version else { return nil }
        hits += 1
        return entry.parts
    }

    /// The whole of order `id` of `company` as stored, if known. Only for a row no statement of
    /// the open transaction has changed (`OrderRowWrites.last(of:)` is 0): the caller checks.
    /// Another company's order is not found, as the row's `WHERE company_id = ?` would not.
    mutating func row(of id: OrderID, in company: CompanyID) -> CachedOrderRow? {
        guard let index = entries.index(forKey: id), let row = entries.values[index].row, row.order.companyID == company
        else { return nil }
        rowHits += 1
        return row
    }

    /// A transaction committed, leaving the file at data version `version`: `seen` are parts it
    /// read or kept, `changed` the orders whose stages or documents it may have written or that
    /// it deleted, `rows` the rows it read or left.
    mutating func committed(
        version: UInt32?, seen: [OrderID: OrderParts], changed: Set<OrderID>, rows: [OrderID: CachedOrderRow]
    ) {
        self.version = version
        for id in changed { drop(id) }
        // A row changed after its note (`row.write` is not its last write) is dropped at the next
        // `BEGIN`, before anything reads it. A row is kept only beside its version's parts.
        for (id, parts) in seen where !changed.contains(id) {
            drop(id)
            let size = Self.size(of: parts)
            guard size <= Self.largestEntry else { continue }
            if entries.count >= Self.capacity || bytes + size > Self.byteCapacity { forget() }
            entries[id] = Entry(parts: parts, partsBytes: size)
            bytes += size
        }
        for (id, row) in rows where !changed.contains(id) {
            guard let index = entries.index(forKey: id) else { continue }
            dropRow(at: index)
            guard entries.values[index].parts.version == row.version,
                entries.values[index].partsBytes + row.size <= Self.largestEntry, bytes + row.size <= Self.byteCapacity
            else { continue }
            entries.values[index].row = row
            entries.values[index].rowBytes = row.size
            bytes += row.size
        }
    }

    var count: Int { entries.count }

    private mutating func drop(_ id: OrderID) {
        if let old = entries.removeValue(forKey: id) { bytes -= old.bytes }
    }

    private mutating func forget() {
        entries.removeAll(keepingCapacity: true)
        bytes = 0
    }

    /// About what an entry holds: its text, and 64 bytes for each stage and document besides.
    static func size(of parts: OrderParts) -> Int {
        var size = 0
        for stage in parts.stages { size += 64 + stage.address.utf8.count }
        for document in parts.documents { size += 64 + document.name.utf8.count + document.kind.utf8.count }
        return size
    }
}
