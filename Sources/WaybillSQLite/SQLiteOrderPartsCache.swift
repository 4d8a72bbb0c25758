import WaybillDomain

/// An order's stages and documents as committed at one version: what a write reads to answer
/// with the whole order, though most writes (a status, a driver, the notes) change neither.
struct OrderParts: Equatable {
    let version: Int
    let stages: [Stage]
    let documents: [Document]
}

/// The stages and documents of recently written orders, by order and version, so that a write
/// reads the order's row only: two of the three statements of its read (about 4 % of the
/// server's CPU at 1 000 writes/s; docs/BENCHMARKS.md, 2026-12-06 04:55).
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
/// Owned by the writer connection and used only where that connection is (the writer thread, or
/// the service thread inline, never both at once). Bounded by count and by size: full, it starts
/// over, and an order whose parts are large is not kept.
struct OrderPartsCache {
    private var entries: [OrderID: (parts: OrderParts, bytes: Int)] = [:]
    private var bytes = 0
    /// The data version this connection's last commit left; nil: nothing is trusted.
    private var version: UInt32?
    /// Reads it answered (tests).
    private(set) var hits = 0

    /// Entries kept at most, their size in all, and the size of one (text bytes, plus a fixed
    /// allowance per stage and document).
    static let capacity = 4096
    static let byteCapacity = 8 << 20
    static let largestEntry = 32 << 10

    /// A write transaction began; `version` is the file's data version now.
    mutating func began(version: UInt32?) {
        guard version == nil || version != self.version else { return }
        if !entries.isEmpty { forget() }
    }

    /// The parts of order `id` at `version`, if known.
    mutating func parts(of id: OrderID, at version: Int) -> OrderParts? {
        guard let entry = entries[id], entry.parts.version == version else { return nil }
        hits += 1
        return entry.parts
    }

    /// A transaction committed, leaving the file at data version `version`: `seen` are parts it
    /// read or kept, `changed` the orders whose stages or documents it may have written or that
    /// it deleted.
    mutating func committed(version: UInt32?, seen: [OrderID: OrderParts], changed: Set<OrderID>) {
        self.version = version
        for id in changed { drop(id) }
        for (id, parts) in seen where !changed.contains(id) {
            drop(id)
            let size = Self.size(of: parts)
            guard size <= Self.largestEntry else { continue }
            if entries.count >= Self.capacity || bytes + size > Self.byteCapacity { forget() }
            entries[id] = (parts, size)
            bytes += size
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
