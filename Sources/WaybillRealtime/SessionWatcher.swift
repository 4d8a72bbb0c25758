public import Foundation
import Synchronization
public import WaybillDomain
public import WaybillObservability
public import WaybillStorage

/// Hears of logouts made on any node (they are recorded in the shared store) and acts on this
/// node: the user's sockets close with 4001 and the API forgets the user's cached tokens, so a
/// revoked token stops working everywhere within about `interval` (SPEC §6).
public final class SessionWatcher: Sendable {
    private let store: any OrderStore
    private let interval: Duration
    private let now: @Sendable () -> Date
    private let clock: any Clock<Duration>
    private let logger: Logger
    private let loggedOut: @Sendable (Logout) -> Void
    /// A poll answered after none did for `lostTrackAfter` (`lostTrack`).
    private let lostTrackAfter: Duration
    private let lostTrack: @Sendable () -> Void
    /// Which logouts were acted on: by a poll, or by this node when it made them (`actedOn`).
    private let window: Mutex<LogoutWindow>
    /// When the watcher was made: where the first window, and the monotonic gap, start.
    private let madeAt = ContinuousClock.now

    /// - Parameters:
    ///   - interval: time between polls (250 ms keeps "within 1 s" with room for a slow read).
    ///   - overlap: how far back each poll looks (see `LogoutWindow`).
    ///   - lostTrack: called when a poll answers after none did for `lostTrackAfter` (half the
    ///     hour logout records are kept, `OutboxPruner`'s session retention): logouts made meanwhile
    ///     may be gone from the store, so the poll cannot say whose sockets they revoked (found by a
    ///     review, 2026-12-05: a node cut off from PostgreSQL for over an hour kept serving
    ///     logged-out users their company's events). The server reads each connected user's
    ///     session epoch instead, and closes the sockets it revoked (`Hub.sweepSessions`).
    ///   - loggedOut: called once per new logout: close the sockets it revoked, forget cached tokens.
    public init(
        store: any OrderStore, interval: Duration = .milliseconds(250), overlap: Duration = .seconds(5),
        now: @escaping @Sendable () -> Date, clock: any Clock<Duration> = ContinuousClock(), logger: Logger,
        lostTrackAfter: Duration = .seconds(1800), lostTrack: @escaping @Sendable () -> Void = {},
        loggedOut: @escaping @Sendable (Logout) -> Void
    ) {
        self.lostTrackAfter = lostTrackAfter
        self.lostTrack = lostTrack
        self.store = store
        self.interval = interval
        self.now = now
        self.clock = clock
        self.logger = logger
        self.loggedOut = loggedOut
        // The first window reaches back to now, not to when `run` first polls: the server makes
        // the watcher before it opens its listener and starts `run` in a task after, which a starved
        // pool can start seconds late; counted from then, the window missed for good a logout
        // another node made meanwhile, with this node's sockets already open.
        var window = LogoutWindow(overlap: overlap.timeInterval)
        window.started(now: now())
        self.window = Mutex(window)
    }

    /// A logout made on this node, whose sockets were closed at once: the next poll skips it (acting
    /// again would find nothing more to close, since session epochs spare a login made since).
    public func actedOn(_ logout: Logout) { window.withLock { $0.actedOn(logout) } }

    /// Polls until cancelled. A failed poll is logged and retried on the next one.
    public func run() async {
        var failing = false
        // The gap is also measured on the monotonic clock: a wall clock set back during an outage
        // would hide it.
        var answeredAt = madeAt
        while !Task.isCancelled {
            let now = self.now(), (since, afterID) = window.withLock { ($0.since(now: now), $0.afterID(now: now)) }
            do {
                let poll = try await store.urgentRead { tx in try tx.logoutPoll(since: since, afterID: afterID) }
                let limit = lostTrackAfter.timeInterval
                let (logouts, lostByWall) = window.withLock { window in
                    let lost = window.lostTrack(now: now, after: limit)  // before `received` moves the last answer
                    return (window.received(poll, now: now), lost)
                }
                let lost = lostByWall || answeredAt.duration(to: .now) > lostTrackAfter
                answeredAt = .now
                for logout in logouts { loggedOut(logout) }
                if lost {
                    logger.warning(
                        "session watcher read no logouts for longer than they are kept: reading the session epoch of every connected user",
                        ["limit_seconds": "\(Int(limit))"])
                    lostTrack()
                }
                if failing { logger.info("session watcher reads the store again") }
                failing = false
            } catch {
                if !failing { logger.warning("session watcher cannot read logouts", ["error": "\(error)"]) }
                failing = true
            }
            do { try await clock.sleep(for: interval) } catch { break }
        }
    }
}
