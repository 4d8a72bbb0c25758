import Foundation
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

extension Hub {
    /// Authenticates off the service thread, then admits or closes on it.
    func authenticate(_ socket: SocketID, _ handshake: Handshake) async {
        let user: User?
        do {
            if let ticket = handshake.ticket {
                user = try await authenticator.redeemTicket(ticket)
            } else if let token = handshake.token {
                user = try await authenticator.user(forToken: token)
            } else {
                user = nil
            }
        } catch {
            logger.warning("socket authentication failed", ["socket": "\(socket)", "error": "\(error)"])
            execute { io in self.refuse(socket, .unavailable, io: io) }
            return
        }
        guard let user else {
            execute { io in self.refuse(socket, .notAuthenticated, io: io) }
            return
        }
        guard let company = user.companyID else {
            execute { io in self.refuse(socket, .noCompany, io: io) }
            return
        }
        let group: Group =
            user.role == .driver ? .driver(user.id) : handshake.wantsFleet ? .fleet(company) : .company(company)
        execute { io in self.admit(socket, user: user, group: group, resume: handshake.resume, io: io) }
    }

    private func refuse(_ socket: SocketID, _ refusal: Connection.Refusal, io: any SocketIO) {
        guard let action = connections[socket]?.machine.refused(refusal) else { return }
        perform([action], on: socket, io: io)
    }

    /// Joins the group and lets the machine decide: live at once, or `connected` then a replay.
    private func admit(_ socket: SocketID, user: User, group: Group, resume: Connection.Resume, io: any SocketIO) {
        guard io.isOpen(socket),
            let actions = connections[socket]?.machine.authenticated(
                user: user.id, group: group, resume: resume, newest: newestDelivered)
        else { return }
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
            case .runReplay(let request):
                metrics.resumed()
                Task { await self.replay(socket, request) }
            case .close(let code, let reason):
                io.close(socket, code: code, reason: reason)
            }
        }
    }

    /// The replay query, off the service thread; its answer goes back to the socket's machine.
    private func replay(_ socket: SocketID, _ request: Connection.ReplayRequest) async {
        let limit = maxReplayEvents, byteLimit = maxReplayBytes
        let result: Connection.ReplayResult
        do {
            let found = try await store.read { tx in try Self.replayQuery(request, limit: limit, in: tx) }
            switch found {
            case .reset(let newest):
                result = .reset(newest: newest)
            case .events(let events):
                let frames = events.map { (id: $0.id, frame: OutboundFrame(text: EventFrame.json($0))) }
                // A replay the socket's outbound queue cannot hold would end in 4008, and the
                // client would come back with the same cursor: answer reset instead.
                let bytes = frames.reduce(0) { $0 + $1.frame.count }
                result = bytes > byteLimit ? .reset(newest: events.last?.id ?? request.after) : .events(frames)
            }
        } catch {
            logger.warning("replay failed", ["socket": "\(socket)", "error": "\(error)"])
            result = .failed
        }
        execute { io in
            guard let actions = self.connections[socket]?.machine.replayLoaded(result) else { return }
            self.perform(actions, on: socket, io: io)
        }
    }

    enum ReplayFound: Sendable {
        case events([StoredEvent])
        case reset(newest: EventID)
    }

    /// What a resume gets: `reset` for a cursor whose event is gone or different (another history),
    /// an id before the pruned range or past the newest, or more than `limit` events; else the events.
    static func replayQuery(_ request: Connection.ReplayRequest, limit: Int, in tx: any StoreReader) throws -> ReplayFound {
        let newest = try tx.newestEventID()
        if let expected = request.expected, expected != .origin {
            guard let stored = try tx.event(expected.id), expected.matches(stored) else { return .reset(newest: newest) }
        }
        if request.after < (try tx.prunedThrough()) || request.after > newest { return .reset(newest: newest) }
        let events = try tx.events(of: request.group, after: request.after, limit: limit + 1)
        return events.count > limit ? .reset(newest: newest) : .events(events)
    }
}
