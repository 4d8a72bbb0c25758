/// How long a node has been blind: its broker subscription lost and every store read since then
/// failing (`HubFeed`). Past `limit`, once per such spell, the node closes its sockets with 1013
/// (`FeedTarget.lostTouch`), so that their clients resume on a node that can deliver.
///
/// Why: a node cut off from PostgreSQL and Redis while its clients still reach it (a network
/// partition) kept their sockets open and delivered nothing for as long as the cut lasted; a
/// driver's app had no reason to go elsewhere (its pings are answered). A node that reaches either
/// one stays as it is: with the broker it still delivers other nodes' events, and with the store it
/// reads them (an outage of PostgreSQL alone keeps every socket open, docs/SCALING.md). Blind
/// everywhere at once (both down for every node), the closes cost a reconnect each when they come
/// back, with backoff and jitter, and nothing is lost: clients resume by cursor.
public struct FeedBlindness: Sendable, Equatable {
    public let limit: Duration
    /// When the spell began (the first failed read with the broker down), on the feed's clock.
    public private(set) var since: Duration?
    /// The sockets were closed in this spell.
    public private(set) var acted = false

    public init(limit: Duration) { self.limit = limit }

    /// A store read failed at `now` (`brokerDown`: with the broker subscription lost). Whether to
    /// close the sockets now: once, when the spell reaches `limit`.
    public mutating func readFailed(at now: Duration, brokerDown: Bool) -> Bool {
        guard brokerDown else {
            sawLife()
            return false
        }
        let start = since ?? now
        since = start
        guard !acted, now - start >= limit else { return false }
        acted = true
        return true
    }

    /// A store read worked, or the broker subscription is back: the spell is over.
    public mutating func sawLife() {
        since = nil
        acted = false
    }
}
