extension DriverSession {
    /// The connection's rules as a value: each method takes what happened and returns what to do.
    ///
    /// It owns the resume point (the last event id and cursor seen) and the count of failures since the
    /// socket was last live; it never sleeps or does I/O, so every rule is tested by comparing actions.
    /// The `since` in its actions is informational: the session reads ``lastEventID`` and ``lastCursor``
    /// when it actually opens the socket, since events may arrive in between.
    struct StateMachine: Sendable {
        /// What the session must do next.
        enum Action: Hashable, Sendable {
            /// Open a socket now, resuming after `since`.
            case connect(since: EventID?)
            /// Wait `after`, then call ``backoffElapsed()``; the socket will resume after `since`.
            case reconnect(after: Duration, since: EventID?)
            /// Give up on the socket; rely on polling.
            case pollOnly
            /// Stop for good (until the app calls `start()` again) and report `reason`.
            case stop(StopReason)
            /// Close the current socket, if any; the app asked to stop.
            case disconnect
            /// An order changed: apply the sync rules to it.
            case orderChanged(OrderEventFrame)
            /// The socket is (again) live: refetch the list, events may have been missed before it.
            case refreshList
            /// The socket is live after a resume: refetch the list and send a ping. The server answers
            /// it after the replay, so a `reset` (history rewound) comes before its pong; until one of
            /// them, queued actions wait (``holdsActions``).
            case refreshListAndProbeResume
            /// The resume's outcome is known and was not a `reset`: queued actions may go.
            case resumeConfirmed
            /// The server cannot replay: refetch everything shown.
            case refreshEverything
            /// A wake-up during a backoff the server asked for: no socket before it ends, but the
            /// list is refetched now, as the reconnect would have.
            case refetchWhileWaiting
            /// Nothing to do.
            case none
        }

        let policy: ReconnectPolicy
        private(set) var state: ConnectionState = .stopped(.notStarted)
        /// The newest event id seen: the `since` of the next connection.
        private(set) var lastEventID: EventID?
        /// The cursor of that event: the `cursor` of the next connection (SPEC §5 rule 5). `nil` when the
        /// frame that set ``lastEventID`` had none (an older server); the connection then resumes by `since`.
        private(set) var lastCursor: ResumeCursor?
        /// The `connected` frame of the current socket: where a `reset` continues from.
        private var connected: ConnectedFrame?
        /// Connection attempts that failed since a socket last proved stable (``provedStable()``).
        private var failures = 0
        /// Whether the session has a cursor to resume from and no socket has yet shown whether the
        /// server's history is still the one the cursor came from: set at every connect and when a
        /// live socket drops, cleared by a pong, an event or a `reset` (or the bounds of `holdsActions`).
        private(set) var resumeOutcomePending = false
        /// Whether a REST call answered since the last connect attempt that failed before its upgrade.
        private var restAnsweredWhileDown = false
        /// Connect attempts in a row that failed before the upgrade (no close code) with a REST call
        /// answered before each: two mean the socket cannot get through while the server can.
        private var upgradesFailedWithRESTUp = 0
        /// Sockets in a row that said `connected` and closed before the resume's outcome (a replay
        /// that keeps failing, 1013s): three mean the server cannot give it for now.
        private var connectedWithoutOutcome = 0
        /// The last attempts showed no socket can give the outcome: connects do not hold the queue
        /// again until a socket gets through (`connected`), which probes once more.
        private var cannotTell = false
        /// A socket was closed 4001 before `connected` and the next attempt (with a fresh ticket)
        /// is under way. A ticket that expired or was used on its way in (a slow link, a phone
        /// suspended between the ticket and the upgrade, a proxy that retried the upgrade) is
        /// refused with 4001 like a bad token, and logged a driver with a valid token out (found by
        /// a review, 2026-12-05). The fresh ticket's request tells them apart (401 if the token is
        /// gone); a second 4001 before `connected` in a row stops as before.
        private var refusalRetried = false
        /// The backoff under way follows a close by which the server asked to wait
        /// (``waitingCloseCodes``): a wake-up does not cut it short.
        private var serverAskedToWait = false

        /// Close codes by which the server asks the client to come back later, not sooner: 1013
        /// (overloaded; also a ticket request answered 429 or 503), 1011 (its own failure), 1012
        /// (restarting, or a history rewind closing every socket at once) and 1008 (this client
        /// sent too much).
        static let waitingCloseCodes: Set<Int> = [1008, 1011, 1012, 1013]

        /// Whether queued actions must wait: a resume is under way and its outcome is unknown.
        ///
        /// After a restore or a failover that lost commits, versions repeat with other content: an
        /// action queued with `If-Match` for a version seen before the rewind could match a new
        /// version the driver never saw. The `reset` that says so comes on the socket, after
        /// `connected`; this holds the queue until it, an event, or the probe's pong comes
        /// (docs/PROTOCOL.md, "Offline actions"). Held while backing off too: when the server comes
        /// back, the action's own retry must not go before the socket's resume. Not held once the
        /// socket gives up (polling only), and not while a socket fails to connect to a server whose
        /// REST calls answer (a proxy that blocks WebSockets): that socket can never tell.
        var holdsActions: Bool {
            guard resumeOutcomePending else { return false }
            switch state {
            case .connecting, .live, .backingOff: return true
            case .pollingOnly, .stopped: return false
            }
        }

        /// Every connect: a connection that resumes must show its outcome before actions go.
        private mutating func connecting(attempt: Int) -> Action {
            connected = nil
            state = .connecting(attempt: attempt)
            resumeOutcomePending = lastEventID != nil && !cannotTell
            return .connect(since: lastEventID)
        }

        /// A REST call answered (a list fetch): the server is reachable.
        mutating func restAnswered() {
            if case .live = state { return }
            restAnsweredWhileDown = true
        }

        /// A connect attempt ended: one that never opened (no close code) while REST calls answer
        /// counts toward releasing a held queue; a socket the server closed shows WebSockets do get
        /// through (a 1013 in a reconnect storm), so it does not.
        private mutating func attemptEnded(code: Int?) {
            guard resumeOutcomePending else { return }
            guard code == nil, case .connecting = state else {
                upgradesFailedWithRESTUp = 0
                return
            }
            if restAnsweredWhileDown {
                upgradesFailedWithRESTUp += 1
                restAnsweredWhileDown = false
            }
            // The server answers REST calls but twice the socket could not open: it cannot tell
            // (`holdsActions`), so the queue goes without the check.
            if upgradesFailedWithRESTUp >= 2 { giveUpTheCheck() }
        }

        private mutating func giveUpTheCheck() {
            resumeOutcomePending = false
            cannotTell = true
        }

        /// A pong, an event or a `reset` settled the resume.
        private mutating func outcomeKnown() {
            resumeOutcomePending = false
            connectedWithoutOutcome = 0
        }

        init(policy: ReconnectPolicy, lastEventID: EventID? = nil, lastCursor: ResumeCursor? = nil) {
            self.policy = policy
            self.lastEventID = lastEventID
            self.lastCursor = lastEventID == nil ? nil : lastCursor
        }

        /// The app starts the session.
        mutating func start() -> Action {
            switch state {
            case .stopped:
                failures = 0
                restAnsweredWhileDown = false
                upgradesFailedWithRESTUp = 0
                connectedWithoutOutcome = 0
                cannotTell = false
                refusalRetried = false
                return connecting(attempt: 0)
            case .connecting, .live, .backingOff, .pollingOnly:
                return .none
            }
        }

        /// A stored queue was read only now (the phone was locked when the session was made): its
        /// actions were made in the history `eventID`/`cursor` name. A session that did not resume
        /// from there connects again from it, so a `reset` can still say the history rewound.
        mutating func adoptResumePoint(eventID: EventID, cursor: ResumeCursor?) -> Action {
            lastEventID = eventID
            lastCursor = cursor
            switch state {
            case .stopped:
                return .none  // `start()` resumes from it
            case .connecting, .live, .backingOff, .pollingOnly:
                failures = 0
                return connecting(attempt: 0)
            }
        }

        /// A text frame arrived on the current socket; `position`, what a pong said about it.
        mutating func received(_ frame: ServerFrame, position: ServerFrame.Position? = nil) -> Action {
            if case .stopped = state { return .none }
            switch frame {
            case .connected(let frame):
                // Not a reason to count from 0 yet: a server at capacity says `connected`, then closes.
                state = .live
                refusalRetried = false
                restAnsweredWhileDown = false
                upgradesFailedWithRESTUp = 0
                if cannotTell {
                    cannotTell = false  // this one got through: it can tell
                    resumeOutcomePending = lastEventID != nil
                }
                connected = frame
                // Without a cursor, everything up to the server's newest is covered by the fetch we do now.
                if lastEventID == nil {
                    lastEventID = frame.newestEventID
                    lastCursor = frame.cursor
                }
                return resumeOutcomePending ? .refreshListAndProbeResume : .refreshList
            case .event(let event):
                // The server sends `reset` before any replayed or live event: an event settles it.
                if case .live = state, resumeOutcomePending { outcomeKnown() }
                // Replays never repeat, but a duplicate must not cost a refetch if one ever arrives.
                if let lastEventID, event.eventID <= lastEventID { return .none }
                lastEventID = event.eventID
                lastCursor = event.cursor
                return .orderChanged(event)
            case .reset:
                // The old resume point means nothing to this server (pruned history, another or a restored
                // database): continue from its newest event, as the refetch now covers everything up to it.
                // Keeping the old id would drop every live event below it — after a restore, all of them.
                lastEventID = connected?.newestEventID
                lastCursor = connected?.cursor
                outcomeKnown()
                return .refreshEverything
            case .pong:
                // The server answers a ping after the replay or its `reset` (docs/PROTOCOL.md, "Resume").
                guard case .live = state else { return .none }
                // So every event of ours up to the `connected` frame's newest is in: resume from
                // there next time. Kept at our own last event, a cursor would age while nothing
                // happened to this driver's orders, be pruned after the retention (7 days), and
                // the next resume would get a needless `reset` that refuses queued actions.
                if let newest = connected?.newestEventID, let cursor = connected?.cursor, newest > (lastEventID ?? 0) {
                    lastEventID = newest
                    lastCursor = cursor
                }
                // A server that says how far this socket is (its newest delivered event): on a socket
                // that stays up for days without the driver's own events, the point moves on too.
                if let position, position.eventID > (lastEventID ?? 0) {
                    lastEventID = position.eventID
                    lastCursor = position.cursor
                }
                guard resumeOutcomePending else { return .none }
                outcomeKnown()
                return .resumeConfirmed
            case .unknown, .malformed:
                return .none
            }
        }

        /// The socket closed with `code` (`nil`: dropped without a close frame, or could not be opened).
        mutating func socketClosed(code: Int?, random: inout some RandomNumberGenerator) -> Action {
            switch state {
            case .stopped, .pollingOnly:
                return .none
            case .connecting, .live, .backingOff:
                break
            }
            attemptEnded(code: code)
            if case .live = state {
                if resumeOutcomePending {
                    // Closed after `connected`, before the outcome: three in a row and the server
                    // cannot give it for now (a failing replay, 1013s); the queue goes without it.
                    connectedWithoutOutcome += 1
                    if connectedWithoutOutcome >= 3 { giveUpTheCheck() }
                } else if !cannotTell {
                    // A live socket went down: whatever it settled, the next one may meet another
                    // history (a failover is a drop and a reconnect to a database that lost the
                    // last commits), and an action's retry may come before that socket's resume.
                    resumeOutcomePending = lastEventID != nil
                }
            }
            var refusedBeforeConnected = false
            if case .connecting = state { refusedBeforeConnected = code == 4001 }
            // "In a row": any other close gives the retry back (a 1006 on a bad link between two
            // expired tickets must not log the driver out).
            if !refusedBeforeConnected { refusalRetried = false }
            switch code {
            case 4001 where !(refusedBeforeConnected && !refusalRetried):
                state = .stopped(.notAuthenticated)
                return .stop(.notAuthenticated)
            case 4003:
                state = .stopped(.notAllowed)
                return .stop(.notAllowed)
            default:
                if refusedBeforeConnected { refusalRetried = true }  // once, with a fresh ticket
                serverAskedToWait = code.map(Self.waitingCloseCodes.contains) ?? false
                let attempt = failures
                failures += 1
                guard let delay = policy.delay(forAttempt: attempt, random: &random) else {
                    state = .pollingOnly
                    return .pollOnly
                }
                state = .backingOff(attempt: attempt, delay: delay)
                return .reconnect(after: delay, since: lastEventID)
            }
        }

        /// The socket has stayed live for the policy's `stableAfter`: the next drop counts from attempt 0.
        mutating func provedStable() {
            if case .live = state { failures = 0 }
        }

        /// The backoff delay of the last ``Action/reconnect(after:since:)`` has passed.
        mutating func backoffElapsed() -> Action {
            guard case .backingOff(let attempt, _) = state else { return .none }
            return connecting(attempt: attempt + 1)
        }

        /// The app came to the foreground or the network came back: a waiting socket reconnects at once.
        ///
        /// A live or connecting socket is left alone, and so is a stopped session (a 4001 will not heal by
        /// retrying; the app must log in and start again). From a backoff the attempt count is kept:
        /// a phone whose network comes and goes (a path monitor fires often on the move) reset it at
        /// every wake-up and came back at the first delay against a server closing sockets with
        /// 1013 (found by a review, 2026-12-05); a socket that proves stable starts it over. A
        /// backoff after the server asked to wait (``waitingCloseCodes``) is not cut short at all:
        /// the wake-up says the phone's network is back, not the server, and each early reconnect
        /// cost the server a ticket, a handshake and often a list refetch (a later review); the list
        /// is refetched instead (`.refetchWhileWaiting`). After
        /// polling only, a wake-up brings a fresh budget of attempts.
        mutating func wakeUp() -> Action {
            switch state {
            case .backingOff(let attempt, _):
                if serverAskedToWait { return .refetchWhileWaiting }
                return connecting(attempt: attempt + 1)
            case .pollingOnly:
                failures = 0
                return connecting(attempt: 0)
            case .connecting, .live, .stopped:
                return .none
            }
        }

        /// The resume's outcome did not come in time (an older server answers pings before the
        /// replay; a replay slower than this): queued actions go without it.
        mutating func resumeProbeTimedOut() -> Action {
            guard resumeOutcomePending, case .live = state else { return .none }
            outcomeKnown()
            return .resumeConfirmed
        }

        /// A REST call answered 401: the token expired or was revoked while the socket stayed up (it
        /// was authenticated when it opened). The same meaning as close code 4001, the same reaction.
        mutating func tokenRefused() -> Action {
            if case .stopped = state { return .none }
            state = .stopped(.notAuthenticated)
            return .stop(.notAuthenticated)
        }

        /// The app stops the session.
        mutating func stop() -> Action {
            if case .stopped = state { return .none }
            state = .stopped(.stoppedByApp)
            return .disconnect
        }
    }
}
