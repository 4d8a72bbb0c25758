public import WaybillDomain
public import WaybillStorage

/// The logouts a hub has acted on, numbered in the order it acted, for the sockets that were
/// still authenticating then (`Hub.admit`). Service thread only.
///
/// A socket notes `count` when it opens; at admission, a logout of its user numbered after that
/// means its authentication may have read credentials the logout revoked. Entries are dropped once
/// no authenticating socket opened before them, so the ledger holds about one entry per logout
/// during the last authentication timeout.
public struct LogoutLedger: Sendable {
    /// Logouts recorded so far.
    public private(set) var count: UInt64 = 0
    /// Each logged-out user's latest logout number, and the highest epoch their logouts started.
    private var latest: [UserID: (number: UInt64, epoch: SessionEpoch)] = [:]
    /// Entries kept before the next trim is tried.
    private var trimAt = 64

    public init() {}

    /// Records `logout`. `oldestPending` gives the smallest `count` noted by a socket still
    /// authenticating (nil: none); it is asked only when the ledger has grown.
    public mutating func record(_ logout: Logout, oldestPending: () -> UInt64?) {
        count += 1
        let epoch = max(latest[logout.userID]?.epoch ?? logout.epoch, logout.epoch)
        latest[logout.userID] = (count, epoch)
        guard latest.count >= trimAt else { return }
        // A logout numbered at or below the oldest pending socket's count came before every such socket opened.
        let floor = oldestPending() ?? count
        latest = latest.filter { $0.value.number > floor }
        trimAt = max(64, latest.count * 2)
    }

    /// Whether a logout of `user` recorded after a socket noted `opened` revoked the socket's
    /// credential of session epoch `epoch`.
    public func revoked(_ user: UserID, epoch: SessionEpoch, since opened: UInt64) -> Bool {
        guard let entry = latest[user] else { return false }
        return entry.number > opened && epoch < entry.epoch
    }

    /// Users with an entry (tests: the ledger stays small).
    public var entries: Int { latest.count }
}
