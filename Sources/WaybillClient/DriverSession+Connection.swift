extension DriverSession {
    /// Carries out what the connection state machine decided, then tells subscribers if the state changed.
    func perform(_ action: StateMachine.Action) {
        switch action {
        case .connect:
            openSocket()
        case .reconnect(let delay, _):
            backoffTask?.cancel()
            let timer = startTimer(delay)
            backoffTask = Task {
                do { try await timer(1) } catch { return }  // cancelled: a wake-up or stop came first
                self.backoffElapsed()
            }
        case .pollOnly:
            break  // the list poll keeps running; nothing else to do until the app wakes us
        case .stop:
            closeSocket()
            haltWork()
        case .disconnect:
            closeSocket()
        case .orderChanged(let event):
            enqueue(SyncRules.work(for: event, cached: openDetails))
        case .refreshList, .refreshListAndProbeResume:
            // A socket went live: the server is reachable, and nothing is reported on this socket yet.
            watchStability(generation: connectionGeneration)
            enqueue(.list)
            receipts.connectionOpened()
            reportShown()
            if action == .refreshListAndProbeResume, let connection {
                // Answered after the replay: a `reset` comes before this pong (docs/PROTOCOL.md, "Resume").
                Task { await connection.send(Heartbeat.ping) }
                startResumeCheck()
            }
            serverLooksReachable()  // held while the resume's outcome is unknown (`holdsActions`)
        case .resumeConfirmed:
            break  // the queue is released below
        case .refetchWhileWaiting:
            // What the driver looks at is refetched now, as the reconnect would have (and the panel does).
            perform(list.bumpRevision())
        case .refreshEverything:
            // After a restore or failover the same versions (and so the same tags) can name other
            // content: refetch without If-None-Match, or a 304 would keep what no longer exists.
            // Versions may also have gone down: what the refetch brings replaces the cache whatever
            // its version, nothing asked for before the reset replaces what it brought, and nothing
            // asked for before the reset brings its tag back (`CachedDetail.isReplaced`, `keep`).
            historyGeneration += 1
            receipts.connectionOpened()  // what the refetch brings is reported again, same numbers or not
            list.forgetTag()
            for id in details.keys { details[id]?.etag = nil }
            enqueue(.everything)
            refuseActionsFromBeforeTheRewind()
        case .none:
            break
        }
        releaseActionsIfResumeSettled()
        publishStateIfChanged()
    }

    /// Queued actions wait while a resume's outcome is unknown (`StateMachine.holdsActions`); once it
    /// is known (a pong, an event, a `reset`, the socket gone, the limit passed) they go.
    private func releaseActionsIfResumeSettled() {
        if machine.holdsActions {
            actionsHeldForResume = true
        } else {
            if resumeCheckTask != nil {
                resumeCheckTask?.cancel()
                resumeCheckTask = nil
            }
            if actionsHeldForResume {
                actionsHeldForResume = false
                sendNextAction()
            }
            if receiptsHeldForResume {
                receiptsHeldForResume = false
                reportShown()
            }
        }
    }

    /// Bounds the wait, on a live socket, for a resume's outcome: an older server answers the probe
    /// before its replay, a replay may be slow; after `resumeCheckLimit` the queue goes without it.
    private func startResumeCheck() {
        resumeCheckTask?.cancel()
        let timer = startTimer(resumeCheckLimit)
        let generation = connectionGeneration
        resumeCheckTask = Task {
            do { try await timer(1) } catch { return }
            // A timer of an earlier socket that fired just as it was replaced: not this socket's limit.
            guard !Task.isCancelled, generation == self.connectionGeneration, self.isRunning else { return }
            self.resumeCheckTask = nil
            self.perform(self.machine.resumeProbeTimedOut())
        }
    }

    private func backoffElapsed() {
        backoffTask = nil
        guard isRunning else { return }
        perform(machine.backoffElapsed())
    }

    /// Replaces any socket with a new one that resumes after the machine's last event id.
    private func openSocket() {
        backoffTask?.cancel()
        backoffTask = nil
        closeSocket()
        let generation = connectionGeneration
        connectionTask = Task { await self.runConnection(generation: generation) }
    }

    /// Abandons the current socket: its task is cancelled and anything it still reports is ignored.
    private func closeSocket() {
        connectionGeneration += 1
        connectionTask?.cancel()
        connectionTask = nil
        heartbeatTask?.cancel()
        heartbeatTask = nil
        heartbeat = nil
        stabilityTask?.cancel()
        stabilityTask = nil
        if let connection {
            self.connection = nil
            Task { await connection.close(code: 1000) }
        }
    }

    /// Opens one socket, feeds its frames to the machine, and reports how it closed.
    private func runConnection(generation: Int) async {
        var closeCode: Int?
        var tokenRefusedByREST = false
        do {
            // The cursor is read now, not when the connect was decided: events may have arrived in between.
            let request = try await api.eventSocketRequest(since: machine.lastEventID, cursor: machine.lastCursor)
            guard generation == connectionGeneration else { return }
            let opened = try await transport.connect(request)
            guard generation == connectionGeneration else {
                await opened.close(code: 1000)
                return
            }
            connection = opened
            startHeartbeat(generation: generation)
            receiving: for await message in opened.messages {
                guard generation == connectionGeneration else { return }
                heartbeat?.frameReceived()
                switch message {
                case .text(let text):
                    let parsed = ServerFrame.parseWithPosition(text)
                    perform(machine.received(parsed.frame, position: parsed.position))
                case .closed(let code):
                    closeCode = code
                    break receiving
                }
            }
        } catch WaybillClientError.notAuthenticated {
            // The ticket endpoint refused the token: the token is gone (no retry, unlike a socket
            // closed 4001 before `connected`, which may be a ticket that expired on its way).
            tokenRefusedByREST = true
        } catch WaybillClientError.notAllowed {
            closeCode = 4003
        } catch let error as WaybillClientError where error.status == 429 || error.status == 503 {
            // The server answered the ticket request and asked to wait (its rate, a store outage):
            // like a socket it closes with 1013, this is not an upgrade a proxy refused, so it must
            // not count toward giving up the resume check (`attemptEnded`; found by a review).
            closeCode = 1013
        } catch {
            closeCode = nil  // could not connect: treated as an abnormal drop
        }
        guard generation == connectionGeneration else { return }
        connection = nil
        connectionTask = nil
        heartbeatTask?.cancel()
        heartbeatTask = nil
        stabilityTask?.cancel()
        stabilityTask = nil
        perform(tokenRefusedByREST ? machine.tokenRefused() : machine.socketClosed(code: closeCode, random: &random))
    }

    /// Pings the socket of `generation` every interval and drops it if it stays silent.
    private func startHeartbeat(generation: Int) {
        guard let interval = heartbeatInterval else { return }
        heartbeat = Heartbeat(interval: interval)
        let timer = startTimer(interval), elapsed = startStopwatch()
        heartbeatTask = Task {
            var tick = 1
            while true {
                do { try await timer(tick) } catch { return }
                guard generation == self.connectionGeneration, var beat = self.heartbeat else { return }
                // Ticks missed while the app was suspended (or the device slept) came due at once,
                // one after another: a ping, then "dead" before its pong could arrive, and a
                // healthy socket was dropped at every wake (found by a review, 2026-12-05). A tick
                // half an interval late or more starts the heartbeat over: a ping now, judged at
                // the first tick a whole interval from now.
                let now = elapsed() / interval  // in intervals since the socket opened
                if now - Double(tick) >= 0.5 {
                    beat = Heartbeat(interval: interval)
                    tick = Int(now.rounded(.up)) + 1
                } else {
                    tick += 1
                }
                let action = beat.intervalElapsed()
                self.heartbeat = beat
                switch action {
                case .sendPing:
                    await self.connection?.send(Heartbeat.ping)
                case .declareDead:
                    self.socketWentSilent()
                    return
                }
            }
        }
    }

    /// Once the socket of `generation` has stayed live for the policy's `stableAfter`, the machine counts
    /// reconnect attempts from 0 again (a socket closed sooner keeps backing off from where it was).
    private func watchStability(generation: Int) {
        stabilityTask?.cancel()
        let timer = startTimer(machine.policy.stableAfter)
        stabilityTask = Task {
            do { try await timer(1) } catch { return }
            guard generation == self.connectionGeneration else { return }
            self.machine.provedStable()
            self.stabilityTask = nil
        }
    }

    /// The heartbeat found the socket dead: abandon it and react as to a drop without a close frame.
    private func socketWentSilent() {
        closeSocket()
        perform(machine.socketClosed(code: nil, random: &random))
    }

    func publishStateIfChanged() {
        guard machine.state != publishedState else { return }
        publishedState = machine.state
        publish(.connection(machine.state))
    }
}
