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
            /// The server cannot replay: refetch everything shown.
            case refreshEverything
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

        init(policy: ReconnectPolicy, lastEventID: EventID? = nil) {
            self.policy = policy
            self.lastEventID = lastEventID
        }

        /// The app starts the session.
        mutating func start() -> Action {
            switch state {
            case .stopped:
                failures = 0
                connected = nil
                state = .connecting(attempt: 0)
                return .connect(since: lastEventID)
            case .connecting, .live, .backingOff, .pollingOnly:
                return .none
            }
        }

        /// A text frame arrived on the current socket.
        mutating func received(_ frame: ServerFrame) -> Action {
            if case .stopped = state { return .none }
            switch frame {
            case .connected(let frame):
                // Not a reason to count from 0 yet: a server at capacity says `connected`, then closes.
                state = .live
                connected = frame
                // Without a cursor, everything up to the server's newest is covered by the fetch we do now.
                if lastEventID == nil {
                    lastEventID = frame.newestEventID
                    lastCursor = frame.cursor
                }
                return .refreshList
            case .event(let event):
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
                return .refreshEverything
            case .pong, .unknown, .malformed:
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
            switch code {
            case 4001:
                state = .stopped(.notAuthenticated)
                return .stop(.notAuthenticated)
            case 4003:
                state = .stopped(.notAllowed)
                return .stop(.notAllowed)
            default:
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
            connected = nil
            state = .connecting(attempt: attempt + 1)
            return .connect(since: lastEventID)
        }

        /// The app came to the foreground or the network came back: a waiting socket reconnects at once.
        ///
        /// A live or connecting socket is left alone, and so is a stopped session (a 4001 will not heal by
        /// retrying; the app must log in and start again).
        mutating func wakeUp() -> Action {
            switch state {
            case .backingOff, .pollingOnly:
                failures = 0
                connected = nil
                state = .connecting(attempt: 0)
                return .connect(since: lastEventID)
            case .connecting, .live, .stopped:
                return .none
            }
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
