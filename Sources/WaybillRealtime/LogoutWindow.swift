public import Foundation
public import WaybillDomain
public import WaybillStorage

/// Which logouts a node has not acted on yet, from overlapping polls of `store.logoutPoll`.
///
/// Every poll asks for the last `overlap` seconds, so a logout committed just before a poll's
/// snapshot but stamped a little earlier (clocks, commit latency) is still seen by the next one;
/// each logout is acted on once. It also asks for every id above the newest the previous poll
/// found in the store: a logout made by a node whose clock runs behind this one's by more than the
/// overlap is stamped before the window, and was missed for good (its user's sockets on this node
/// stayed open); its id is new all the same. The window still covers what ids cannot: on
/// PostgreSQL a logout may commit after one with a higher id was read.
///
/// The window starts at the last poll that succeeded, not at `now`: after polls failed for longer
/// than the overlap (a store outage, a saturated pool), a logout made meanwhile would otherwise be
/// older than the next window, and this node would never close its user's sockets.
public struct LogoutWindow: Sendable {
    public let overlap: TimeInterval
    /// Logouts already acted on, until they fall out of every future window.
    private var handled: Set<Logout> = []
    /// When the last poll that got an answer was made.
    private var lastAnswered: Date?
    /// The newest logout id in the store at the last answered poll (`nil` before the first): the
    /// next poll asks for every id above it.
    public private(set) var newestID: Int64?

    public init(overlap: TimeInterval = 5) {
        self.overlap = overlap
    }

    /// The `since` of the poll made at `now`: `overlap` before the last answered poll (or `now`).
    public func since(now: Date) -> Date { min(lastAnswered ?? now, now).addingTimeInterval(-overlap) }

    /// A logout this node acted on already (it was made here): a poll that returns it skips it.
    public mutating func actedOn(_ logout: Logout) { handled.insert(logout) }

    /// Takes a poll's answer; returns the logouts not acted on yet, one per user (the one that
    /// started the highest epoch: it revoked what the others did), in the order of the users' first.
    public mutating func received(_ poll: LogoutPoll, now: Date) -> [Logout] {
        // Not kept above what the store says: after a restore the ids start lower again, and new
        // logouts must be found by id from there.
        newestID = max(poll.newestID, poll.logouts.map(\.id).max() ?? 0)
        return received(poll.logouts, now: now)
    }

    public mutating func received(_ logouts: [Logout], now: Date) -> [Logout] {
        lastAnswered = now
        var new: [Logout] = []
        for logout in logouts where handled.insert(logout).inserted {
            if let index = new.firstIndex(where: { $0.userID == logout.userID }) {
                if new[index].epoch < logout.epoch { new[index] = logout }
            } else {
                new.append(logout)
            }
        }
        // Twice the overlap: a logout stamped ahead of this node's clock stays remembered while polls
        // can return it. One found by its id alone (stamped before the window) is not asked for again.
        let horizon = now.addingTimeInterval(-2 * overlap)
        handled = handled.filter { $0.at >= horizon }
        return new
    }
}
