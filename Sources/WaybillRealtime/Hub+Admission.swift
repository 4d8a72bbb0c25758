import Foundation
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

/// What the upgrade request asked for.
struct Handshake: Sendable {
    var ticket: String?
    var token: String?
    var since: EventID?
    var wantsFleet: Bool

    init(_ request: HTTPRequest) {
        ticket = request.queryValue("ticket")
        token = request.queryValue("token")
        since = request.queryValue("since").flatMap { Int64($0) }.map { EventID(max(0, $0)) }
        wantsFleet = request.queryValue("stream") == "fleet"
    }
}

/// Client → server frames: only `{"type":"ping"}` means anything.
enum ClientFrame {
    static func isPing(_ text: String) -> Bool {
        if text == #"{"type":"ping"}"# { return true }
        guard text.utf8.count <= 1024, let data = text.data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return false }
        return object["type"] as? String == "ping"
    }
}

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
            execute { io in io.close(socket, code: 1011, reason: "try again") }
            return
        }
        guard let user else {
            execute { io in io.close(socket, code: 4001, reason: "not authenticated") }
            return
        }
        guard let company = user.companyID else {
            execute { io in io.close(socket, code: 4003, reason: "no company") }
            return
        }
        let group: Group =
            user.role == .driver ? .driver(user.id) : handshake.wantsFleet ? .fleet(company) : .company(company)
        execute { io in self.admit(socket, user: user, group: group, since: handshake.since, io: io) }
    }

    /// Joins the group and sends `connected`; with `since`, starts buffering live events and runs the replay.
    func admit(_ socket: SocketID, user: User, group: Group, since: EventID?, io: any SocketIO) {
        guard let connection = connection(socket), io.isOpen(socket) else { return }
        connection.group = group
        connection.userID = user.id
        join(socket, group)
        metrics.socketClosed(kind: "pending")
        metrics.socketOpened(kind: group.kind)
        io.send(OutboundFrame(text: EventFrame.connected(userID: user.id, groups: [group], newest: newestDelivered)), to: socket)
        guard let since else {
            connection.lastSent = newestDelivered.id
            connection.phase = .live
            return
        }
        // Registered before the query starts: anything committed after the query's snapshot is
        // delivered to the hub after this point and lands in the buffer (docs/ARCHITECTURE.md, "Resume").
        connection.lastSent = since
        connection.phase = .replaying
        metrics.resumed()
        Task { await self.replay(socket, group: group, since: since) }
    }

    private enum ReplayResult: Sendable {
        case events([StoredEvent])
        case reset(newest: EventID)
    }

    private func replay(_ socket: SocketID, group: Group, since: EventID) async {
        let limit = maxReplayEvents, byteLimit = maxReplayBytes
        do {
            let result: ReplayResult = try await store.read { tx in
                let newest = try tx.newestEventID()
                if since < (try tx.prunedThrough()) || since > newest { return .reset(newest: newest) }
                let events = try tx.events(of: group, after: since, limit: limit + 1)
                return events.count > limit ? .reset(newest: newest) : .events(events)
            }
            let framed: [(EventID, OutboundFrame)]
            let resetTo: EventID?
            switch result {
            case .events(let events):
                let frames = events.map { ($0.id, OutboundFrame(text: EventFrame.json($0))) }
                // A replay the socket's outbound queue cannot hold would end in 4008, and the
                // client would come back with the same `since`: answer reset instead.
                if frames.reduce(0, { $0 + $1.1.count }) > byteLimit {
                    framed = []
                    resetTo = events.last?.id ?? since
                } else {
                    framed = frames
                    resetTo = nil
                }
            case .reset(let newest):
                framed = []
                resetTo = newest
            }
            execute { io in self.finishReplay(socket, replayed: framed, resetTo: resetTo, io: io) }
        } catch {
            logger.warning("replay failed", ["socket": "\(socket)", "error": "\(error)"])
            execute { io in io.close(socket, code: 1011, reason: "replay failed; reconnect") }
        }
    }

    /// Sends the replay (or `reset`), then the buffered live events it does not already cover, then goes live.
    private func finishReplay(_ socket: SocketID, replayed: [(EventID, OutboundFrame)], resetTo: EventID?, io: any SocketIO) {
        guard let connection = connection(socket), case .replaying = connection.phase else { return }
        let buffer = connection.buffer
        connection.buffer = []
        if let resetTo {
            metrics.reset()
            io.send(Self.resetFrameShared, to: socket)
            // Not max(): a `since` from another database may be above every id this store will
            // reach soon; after a reset the client refetches everything up to `resetTo`.
            connection.lastSent = resetTo
        }
        var sent = 0
        for (id, frame) in replayed + buffer where id > connection.lastSent {
            connection.lastSent = id
            if io.send(frame, to: socket) { sent += 1 }
        }
        metrics.framesSent(sent)
        connection.phase = .live
    }
}
