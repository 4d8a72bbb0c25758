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
/// domain's transitions bump it, and the `If-Match` tags of SPEC §2 rest on that): the parts of
/// one committed version never change, whichever connection or process wrote them, and a row
/// read at another version misses. Ids are never reused (`AUTOINCREMENT`), so a deleted order's
/// entry can never match another order. Entries come only from transactions that committed (a
/// write that rolled back may have read or made parts of a version that never existed), and an
/// order whose stages or documents a transaction wrote, or that it deleted, is dropped at its
/// commit rather than kept, so the cache never relies on that write's new version.
///
/// Owned by the writer connection and used only where that connection is (the writer thread, or
/// the service thread inline, never both at once). Bounded: full, it starts over.
struct OrderPartsCache {
    private var entries: [OrderID: OrderParts] = [:]
    /// Reads it answered (tests).
    private(set) var hits = 0

    /// Entries kept at most.
    static let capacity = 4096

    /// The parts of order `id` at `version`, if known.
    mutating func parts(of id: OrderID, at version: Int) -> OrderParts? {
        guard let parts = entries[id], parts.version == version else { return nil }
        hits += 1
        return parts
    }

    /// A transaction committed: `seen` are parts it read or kept, `changed` the orders whose
    /// stages or documents it wrote or that it deleted.
    mutating func committed(seen: [OrderID: OrderParts], changed: Set<OrderID>) {
        for id in changed { entries[id] = nil }
        for (id, parts) in seen where !changed.contains(id) {
            if entries.count >= Self.capacity, entries[id] == nil { entries.removeAll(keepingCapacity: true) }
            entries[id] = parts
        }
    }

    var count: Int { entries.count }
}
