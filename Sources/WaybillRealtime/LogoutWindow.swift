public import Foundation
public import WaybillDomain
public import WaybillStorage

/// Which logouts a node has not acted on yet, from overlapping polls of `store.logoutPoll`.
///
/// Every poll asks for the last `overlap` seconds, so a logout committed just before a poll's
/// snapshot but stamped a little earlier (clocks, commit latency) is still seen by the next one;
/// each logout is acted on once. It also asks for every id above the newest the store had a poll
/// `overlap` ago (`afterID`): a logout made by a node whose clock runs behind this one's by more
/// than the overlap is stamped before the window, and was missed for good (its user's sockets on
/// this node stayed open); its id is new all the same.
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
    /// The newest logout id in the store at each answered poll of the last `overlap` seconds (and
    /// the one before them), oldest first.
    private var newestIDs: [(at: Date, id: Int64)] = []

    public init(overlap: TimeInterval = 5) {
        self.overlap = overlap
    }

    /// The `since` of the poll made at `now`: `overlap` before the last answered poll (or `now`).
    public func since(now: Date) -> Date { min(lastAnswered ?? now, now).addingTimeInterval(-overlap) }

    /// The newest logout id the store had at the last answered poll (`nil` before the first).
    public var newestID: Int64? { newestIDs.last?.id }

    /// The `afterID` of the poll made at `now` (`nil` before the first answer: that poll reads by
    /// time only): the newest id as of a poll `overlap` ago, like the window's time. On PostgreSQL
    /// ids are taken at insert, so a logout can commit after one with a higher id was read; asking
    /// again from an older id for the overlap finds it (the handled set keeps it from acting twice).
    public func afterID(now: Date) -> Int64? {
        let cutoff = now.addingTimeInterval(-overlap)
        return (newestIDs.last { $0.at <= cutoff } ?? newestIDs.first)?.id
    }

    /// The watcher starts at `now`: the first window reaches back to it (not to whenever the first
    /// poll answers), and a first answer long after it is a gap like any other.
    public mutating func started(now: Date) {
        if lastAnswered == nil { lastAnswered = now }
    }

    /// Whether the last answered poll was more than `limit` before `now`: logouts older than the
    /// store keeps may have been pruned meanwhile, and no poll can find them any more.
    public func lostTrack(now: Date, after limit: TimeInterval) -> Bool {
        guard let lastAnswered else { return false }
        return now.timeIntervalSince(lastAnswered) > limit
    }

    /// A logout this node acted on already (it was made here): a poll that returns it skips it.
    public mutating func actedOn(_ logout: Logout) { handled.insert(logout) }

    /// Takes a poll's answer; returns the logouts not acted on yet, one per user (the one that
    /// started the highest epoch: it revoked what the others did), in the order of the users' first.
    public mutating func received(_ poll: LogoutPoll, now: Date) -> [Logout] {
        let newest = max(poll.newestID, poll.logouts.map(\.id).max() ?? 0)
        // Ids went back (a restore): what was read before names another history; start over here.
        if let last = newestIDs.last, newest < last.id { newestIDs = [] }
        newestIDs.append((now, newest))
        let cutoff = now.addingTimeInterval(-overlap)
        if let keep = newestIDs.lastIndex(where: { $0.at <= cutoff }) { newestIDs.removeFirst(keep) }
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
        // can return it; one found by its id alone (stamped before the window) while the polls still
        // ask for its id.
        let horizon = now.addingTimeInterval(-2 * overlap), afterID = afterID(now: now) ?? Int64.max
        handled = handled.filter { $0.at >= horizon || $0.id > afterID }
        return new
    }
}
