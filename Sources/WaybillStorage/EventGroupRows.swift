public import WaybillDomain

/// Which rows of the outbox's group index (`event_groups`) an event gets, and whose rows a
/// group's read (`StoreReader.events(of:after:limit:)`) walks. Both stores follow it.
///
/// A company's fleet stream carries exactly its company's events: the broadcaster sends every
/// order event, and every receipt's, to both `company_C` and `fleet_C` (`Broadcaster.groups`,
/// `Broadcaster.events(for: .seen…)`). So a read of the fleet walks its company's rows, and a store
/// may leave the fleet's row out: it was one more index insert in every write, often on a page of
/// its own (SQLite: 13.8 → 11.2 WAL page writes per order write, docs/BENCHMARKS.md, 2026-12-06).
///
/// SQLite leaves it out (its migration 0014 makes an older Waybill refuse the file, which would
/// read fleet rows), and reads a fleet from its company's rows, keeping the events that name the
/// fleet (`read(of:fleetRows:)`): a company-only event, which nothing makes today, is not replayed
/// to the fleet. PostgreSQL still writes the fleet's rows and reads them: in a rolling upgrade an
/// older node, still running, replays a fleet from them, and would skip every event a newer node
/// wrote without one. Its second step, a later release that stops writing them with a migration
/// that refuses older nodes, is in docs/DESIGN.md ("Event ids").
///
/// An event for a fleet without its company is refused by both stores: SQLite would never read
/// it back. Nothing makes one today; the fleet map's live positions (SPEC §7) would, and then need
/// fleet rows of their own again.
package enum EventGroupRows {
    /// The groups that get a row for an event to `groups`: all of them, less each fleet (its
    /// company is listed too) unless `fleetRows`; `nil` if a fleet is listed without its company.
    package static func rows(for groups: [Group], fleetRows: Bool) -> [Group]? {
        var rows: [Group] = []
        rows.reserveCapacity(groups.count)
        for group in groups {
            guard case .fleet(let company) = group else {
                rows.append(group)
                continue
            }
            guard groups.contains(.company(company)) else { return nil }
            if fleetRows { rows.append(group) }
        }
        return rows
    }

    /// `rows(for:fleetRows:)` of each event, by its place in `events`; throws `refused` for the
    /// first event it refuses.
    package static func rows(for events: [OrderEvent], fleetRows: Bool) throws -> [[Group]] {
        try events.map { event in
            guard let rows = rows(for: event.groups, fleetRows: fleetRows) else { throw refused(event.groups) }
            return rows
        }
    }

    /// Whose rows a read of `group` walks, and the group each event found there must name to be
    /// `group`'s (`nil`: every one is): a fleet without rows of its own walks its company's.
    package static func read(of group: Group, fleetRows: Bool) -> (rows: Group, naming: Group?) {
        if !fleetRows, case .fleet(let company) = group { return (.company(company), group) }
        return (group, nil)
    }

    /// What a store throws for an event that `rows(for:)` refuses.
    private static func refused(_ groups: [Group]) -> StoreError {
        .failure(
            code: 0,
            message: "an event for a fleet must go to its company too (groups: \(groups.map(\.name).joined(separator: " ")))")
    }
}
