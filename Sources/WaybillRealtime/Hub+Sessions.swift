public import Foundation
public import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillStorage

/// After the session watcher lost track of logouts (`SessionWatcher`'s `lostTrack`: no poll
/// answered for longer than logout records are kept, so some may be pruned unread).
extension Hub {
    /// How long a sweep waits before each further try of its read: about 30 s in all, so that a
    /// store that answered the watcher's poll but fails the next read (just back, still busy)
    /// does not cost every socket of the node.
    public static let sweepRetries: [Duration] = [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(15)]

    /// Reads the session epoch of every user with a socket here and closes, with 4001, the sockets
    /// whose credential has a smaller one: those a logout revoked, whether or not its record is
    /// still there. Every other socket stays. `revoked` hears of each user who lost a socket (the
    /// server forgets their cached tokens). Call from any thread.
    ///
    /// Why not close every socket: a user's epoch counts all of their logouts, pruned records
    /// included, so it answers exactly what the missed records would have. Closing every socket
    /// with 1012, as the node did before, made a PostgreSQL outage of every node end in every
    /// client of the cluster reconnecting at once, against a database just back. When the read
    /// still fails after `retries`, that is what happens: the node cannot tell whose sockets to keep.
    ///
    /// A socket still authenticating, or admitted after the users were listed, is left alone: its
    /// credential was read from the store after it came back, where a revoked token and its
    /// tickets are refused.
    public func sweepSessions(
        at now: Date, retries: [Duration] = Hub.sweepRetries, revoked: @escaping @Sendable (UserID) -> Void
    ) {
        execute { [self] _ in
            let users = connectedUsers()
            guard !users.isEmpty else { return }
            Task { [self] in
                var waits = retries[...]
                while true {
                    do {
                        let epochs = try await store.urgentRead { tx in try tx.sessionEpochs(of: Array(users)) }
                        execute { [self] io in
                            let closed = closeSockets(of: users, revokedAsOf: epochs, at: now, io: io)
                            for user in closed.users { revoked(user) }
                            logger.info(
                                "session epochs read after logouts were lost track of",
                                ["users": "\(users.count)", "sockets_closed": "\(closed.sockets)"])
                        }
                        return
                    } catch {
                        guard let wait = waits.popFirst() else {
                            logger.warning(
                                "cannot read the session epochs of connected users: closing every socket so each signs in again",
                                ["users": "\(users.count)", "error": "\(error)"])
                            execute { [self] io in closeAll(code: 1012, reason: "service restart", io: io) }
                            return
                        }
                        do { try await clock.sleep(for: wait) } catch { return }
                    }
                }
            }
        }
    }

    /// Closes with 4001 each admitted socket of `users` whose credential's epoch is below its
    /// user's in `epochs`; a user of `users` missing from `epochs` no longer exists, and loses
    /// every socket. Sockets of other users (admitted after the list was made) stay. One pass over
    /// the sockets, whatever the number of users (service thread). Each user who lost a socket is
    /// recorded as logged out at `now` (`LogoutLedger`), as `closeSockets(revokedBy:)` does.
    func closeSockets(
        of users: Set<UserID>, revokedAsOf epochs: [UserID: SessionEpoch], at now: Date, io: any SocketIO
    ) -> (users: Set<UserID>, sockets: Int) {
        var closedUsers: Set<UserID> = [], closed = 0
        for (socket, entry) in connections where entry.machine.phase != .closing {
            guard let user = entry.machine.userID, users.contains(user) else { continue }
            let current = epochs[user] ?? .revokesAll
            guard entry.epoch < current else { continue }
            connections[socket]?.machine.closing()
            io.close(socket, code: 4001, reason: "logged out")
            closedUsers.insert(user)
            closed += 1
        }
        for user in closedUsers {
            logouts.record(Logout(userID: user, at: now, epoch: epochs[user] ?? .revokesAll), oldestPending: oldestAuthenticating)
        }
        return (closedUsers, closed)
    }

    /// Each user with an admitted socket here (service thread).
    func connectedUsers() -> Set<UserID> {
        Set(connections.values.lazy.compactMap { $0.machine.phase == .closing ? nil : $0.machine.userID })
    }
}
