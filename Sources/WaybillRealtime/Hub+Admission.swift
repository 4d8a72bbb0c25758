import Foundation
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

extension Hub {
    /// Starts the socket's authentication task, if fewer than `maxConcurrentAuthentications` run,
    /// with a deadline of `authenticationTimeout`; otherwise closes the socket with 1013 at once.
    /// Service thread.
    func startAuthentication(_ socket: SocketID, _ handshake: Handshake, io: any SocketIO) {
        guard authentications.tryEnter() else {
            metrics.overflowed(.socketAuthentications)
            refuse(socket, .busy, io: io)
            return
        }
        let deadline = deadline(after: configuration.limits.authenticationTimeout) { io in
            self.authenticationTimedOut(socket, io: io)
        }
        Task {
            await self.authenticate(socket, handshake)
            deadline.cancel()
            self.authentications.leave()
        }
    }

    /// Runs `expired` on the service thread after `timeout`, unless the task is cancelled first (the
    /// work it bounds finished in time).
    private func deadline(after timeout: Duration, _ expired: @escaping @Sendable (any SocketIO) -> Void) -> Task<Void, Never> {
        let clock = self.clock
        return Task {
            do { try await clock.sleep(for: timeout) } catch { return }
            self.execute(expired)
        }
    }

    /// The deadline passed: a socket still authenticating is closed (a late answer finds it closing).
    private func authenticationTimedOut(_ socket: SocketID, io: any SocketIO) {
        guard connections[socket]?.machine.phase == .authenticating else { return }
        metrics.overflowed(.socketAuthenticationTime)
        warn(troubleLines.authenticationTimedOut, "socket authentication timed out", socket: socket)
        refuse(socket, .timedOut, io: io)
    }

    /// Authenticates off the service thread, then admits or closes on it.
    func authenticate(_ socket: SocketID, _ handshake: Handshake) async {
        let credential: SocketCredential?
        do {
            if let ticket = handshake.ticket {
                credential = try await authenticator.redeemTicket(ticket)
            } else if let token = handshake.token {
                credential = try await authenticator.credential(forToken: token)
            } else {
                credential = nil
            }
        } catch {
            warn(troubleLines.authenticationFailed, "socket authentication failed", socket: socket, error: error)
            execute { io in self.refuse(socket, .unavailable, io: io) }
            return
        }
        guard let credential else {
            execute { io in self.refuse(socket, .notAuthenticated, io: io) }
            return
        }
        let user = credential.user
        guard let company = user.companyID else {
            execute { io in self.refuse(socket, .noCompany, io: io) }
            return
        }
        // After the company: a user who may never connect is told so (4003), not to try again later.
        if handshake.ticket == nil, !authenticator.admitsSocket(of: user) {
            logger.warning("user is over their request rate; closing the new socket", ["socket": "\(socket)", "user": "\(user.id)"])
            execute { io in self.refuse(socket, .overRate, io: io) }
            return
        }
        let group: Group =
            user.role == .driver ? .driver(user.id) : handshake.wantsFleet ? .fleet(company) : .company(company)
        execute { io in self.admit(socket, credential, group: group, resume: handshake.resume, io: io) }
    }

    func refuse(_ socket: SocketID, _ refusal: Connection.Refusal, io: any SocketIO) {
        guard let action = connections[socket]?.machine.refused(refusal) else { return }
        perform([action], on: socket, io: io)
    }

    /// Joins the group and lets the machine decide: live at once, or `connected` then a replay.
    private func admit(
        _ socket: SocketID, _ credential: SocketCredential, group: Group, resume: Connection.Resume, io: any SocketIO
    ) {
        guard io.isOpen(socket), let entry = connections[socket] else { return }
        let user = credential.user
        // A logout acted on since this socket opened may have come after its authentication read
        // the credentials (a `?token=` is read from a cache or the store before the logout
        // commits): the watcher found no admitted socket to close, so this one is refused here,
        // if that logout revoked its token.
        if logouts.revoked(user.id, epoch: credential.epoch, since: entry.openedAtLogout) {
            refuse(socket, .notAuthenticated, io: io)
            return
        }
        guard userSockets[user.id]?.count ?? 0 < configuration.limits.maxSocketsPerUser else {
            metrics.overflowed(.socketsPerUser)
            logger.warning("user has too many sockets open; closing the new one", ["socket": "\(socket)", "user": "\(user.id)"])
            connections[socket]?.machine.closing()
            io.close(socket, code: 1013, reason: "too many sockets for this user")
            return
        }
        connections[socket]?.epoch = credential.epoch
        guard let actions = connections[socket]?.machine.authenticated(
                user: user.id, group: group, resume: resume, newest: newestDelivered),
            connections[socket]?.machine.group == group
        else { return }  // no longer authenticating: nothing joined, nothing counted (`socketClosed` undoes both)
        userSockets[user.id, default: []].insert(socket)
        join(socket, group)
        if case .driver = group, let company = user.companyID { acceptReceipts(on: socket, company: company) }
        metrics.socketClosed(kind: "pending")
        metrics.socketOpened(kind: group.kind)
        perform(actions, on: socket, io: io)
    }

    /// Runs what a socket's machine asked for. Service thread only.
    func perform(_ actions: [Connection.Action], on socket: SocketID, io: any SocketIO) {
        for action in actions {
            switch action {
            case .sendConnected(let cursor):
                guard let machine = connections[socket]?.machine, let user = machine.userID, let group = machine.group
                else { continue }
                io.send(OutboundFrame(text: EventFrame.connected(userID: user, groups: [group], newest: cursor)), to: socket)
            case .sendReset:
                metrics.reset()
                io.send(Self.resetFrameShared, to: socket)
            case .send(let frames):
                var sent = 0
                for frame in frames where io.send(frame, to: socket) { sent += 1 }
                metrics.framesSent(sent)
            case .sendPongs(let count):
                let pong = pongFrame()
                for _ in 0..<count { io.send(pong, to: socket) }
            case .runReplay(let request):
                metrics.resumed()
                guard replays.tryEnter() else {
                    metrics.overflowed(.replayQueries)
                    connections[socket]?.machine.closing()
                    io.close(socket, code: 1013, reason: "server busy; try again later")
                    continue
                }
                let deadline = deadline(after: configuration.limits.replayTimeout) { io in
                    self.replayTimedOut(socket, io: io)
                }
                Task {
                    await self.replay(socket, request)
                    deadline.cancel()
                    self.replays.leave()  // only when the read ends: it holds a reader meanwhile
                }
            case .recordSeen(let reports):
                record(reports, on: socket)  // Hub+Receipts
            case .close(let code, let reason):
                io.close(socket, code: code, reason: reason)
            }
        }
    }

    /// The replay's deadline passed: a socket still replaying is closed (a late answer finds it
    /// closing); it resumes from the same cursor.
    private func replayTimedOut(_ socket: SocketID, io: any SocketIO) {
        guard connections[socket]?.machine.phase == .replaying else { return }
        metrics.overflowed(.replayTime)
        warn(troubleLines.replayTimedOut, "socket replay timed out", socket: socket)
        connections[socket]?.machine.closing()
        io.close(socket, code: 1013, reason: "replay timed out; try again later")
    }

    /// The replay query, off the service thread; its answer goes back to the socket's machine.
    private func replay(_ socket: SocketID, _ request: Connection.ReplayRequest) async {
        let limit = maxReplayEvents, byteLimit = maxReplayBytes
        let result: Connection.ReplayResult
        do {
            result = try await store.read { tx in try Self.replayQuery(request, limit: limit, byteLimit: byteLimit, in: tx) }
        } catch {
            warn(troubleLines.replayFailed, "replay failed", socket: socket, error: error)
            result = .failed
        }
        execute { io in
            guard let actions = self.connections[socket]?.machine.replayLoaded(result) else { return }
            self.perform(actions, on: socket, io: io)
        }
    }

    /// Events a replay reads at a time: it stops at the first page that passes a limit.
    static let replayPageEvents = 256

    /// What a resume gets: `reset` for a cursor whose event is gone or different (another history),
    /// an id before the pruned range or past the newest, more than `limit` events, or frames
    /// passing `byteLimit` (a replay the socket's outbound queue cannot hold would end in 4008,
    /// and the client would come back with the same cursor); else the events' frames.
    ///
    /// Read a page at a time in one snapshot and encoded as read: a resume far behind used to read
    /// `limit + 1` (10 001) events before finding its reset at the byte limit, some 1 700 frames in,
    /// and one user reconnecting in a loop could keep the reader threads busy with that (found by a
    /// review). `reset(newest:)` names the snapshot's newest event either way.
    static func replayQuery(
        _ request: Connection.ReplayRequest, limit: Int, byteLimit: Int, in tx: any StoreReader
    ) throws -> Connection.ReplayResult {
        let newest = try tx.newestEventID()
        if let expected = request.expected, expected != .origin {
            guard let stored = try tx.event(expected.id), expected.matches(stored) else { return .reset(newest: newest) }
        }
        if request.after < (try tx.prunedThrough()) || request.after > newest { return .reset(newest: newest) }
        var frames: [(id: EventID, frame: OutboundFrame)] = []
        var bytes = 0, after = request.after
        while true {
            // One past the count limit, so that reaching it exactly is not a reset.
            let asked = min(replayPageEvents, limit + 1 - frames.count)
            let page = try tx.events(of: request.group, after: after, limit: asked)
            for event in page {
                guard frames.count < limit else { return .reset(newest: newest) }
                let frame = OutboundFrame(utf8Text: EventFrame.utf8(event))
                bytes += frame.count
                if bytes > byteLimit { return .reset(newest: newest) }
                frames.append((event.id, frame))
            }
            guard page.count == asked, let last = page.last else { return .events(frames) }
            after = last.id
        }
    }
}

extension Hub {
    /// A warning of a kind that comes in floods, at most once a second (`rate`), with how many
    /// were left out since the last one written.
    func warn(_ rate: LogLineRate, _ message: String, socket: SocketID, error: (any Error)? = nil) {
        guard let left = rate.admit() else { return }
        if let error {
            logger.warning(message, ["socket": "\(socket)", "error": "\(error)", "similar_not_logged": "\(left)"])
        } else {
            logger.warning(message, ["socket": "\(socket)", "similar_not_logged": "\(left)"])
        }
    }
}
