public import WaybillDomain

/// Which rows of the outbox's group index (`event_groups`) an event gets, and whose rows a
/// group's read (`StoreReader.events(of:after:limit:)`) walks. Both stores follow it.
///
/// A company's fleet stream carries exactly its company's events: every event the broadcaster
/// makes for `fleet_C` goes to `company_C` too (SPEC §3), so the index keeps one row for both,
/// the company's, and a read of the fleet walks the company's rows. Why: the fleet's row was one
/// more index insert in every write, often on a page of its own (measured: about a tenth of a
/// write's server CPU at 1 000 writes/s on SQLite, docs/BENCHMARKS.md, 2026-12-06).
///
/// An event for a fleet without its company is refused: its fleet row would never be read.
/// Nothing makes one today; the fleet map's live positions (SPEC §7) would, and then need fleet
/// rows and a read of both. Fleet rows written before this are never read, and go with pruning.
package enum EventGroupRows {
    /// The groups that get a row for an event to `groups`: each but a fleet whose company is
    /// listed too; `nil` if a fleet is listed without its company.
    package static func rows(for groups: [Group]) -> [Group]? {
        var rows: [Group] = []
        rows.reserveCapacity(groups.count)
        for group in groups {
            guard case .fleet(let company) = group else {
                rows.append(group)
                continue
            }
            guard groups.contains(.company(company)) else { return nil }
        }
        return rows
    }

    /// The group whose rows hold `group`'s events.
    package static func rows(of group: Group) -> Group {
        if case .fleet(let company) = group { return .company(company) }
        return group
    }

    /// What a store throws for an event that `rows(for:)` refuses.
    package static func refused(_ groups: [Group]) -> StoreError {
        .failure(
            code: 0,
            message: "an event for a fleet must go to its company too (groups: \(groups.map(\.name).joined(separator: " ")))")
    }
}
