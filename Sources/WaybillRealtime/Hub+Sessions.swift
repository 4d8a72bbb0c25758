public import Foundation
import WaybillDomain
public import WaybillStorage
import WaybillObservability

/// After the session watcher lost track of logouts (`SessionWatcher`'s `lostTrack`: no poll
/// answered for longer than logout records are kept, so some may be pruned unread).
extension Hub {
    /// Reads the session epoch of every user with a socket here and acts on each as on the logout
    /// that started it (`closeSockets(revokedBy:)`): the sockets of credentials revoked meanwhile
    /// close with 4001, every other socket stays. `revoked` hears of each such logout (the server
    /// forgets the user's cached tokens). Call from any thread.
    ///
    /// Why not close every socket: a user's epoch counts all of their logouts, pruned records
    /// included, so it answers exactly what the missed records would have. Closing every socket
    /// with 1012, as the node did before, made a PostgreSQL outage of every node end in every
    /// client of the cluster reconnecting at once, against a database just back. When the read
    /// fails, that is still what happens: the node cannot tell whose sockets to keep.
    ///
    /// A socket still authenticating is left to its admission: it reads the credential from the
    /// store now, where a revoked token and its tickets are already refused.
    public func sweepSessions(at now: Date, revoked: @escaping @Sendable (Logout) -> Void) {
        execute { [self] _ in
            let users = connectedUsers()
            guard !users.isEmpty else { return }
            Task { [self] in
                let epochs: [UserID: SessionEpoch]
                do {
                    epochs = try await store.urgentRead { tx in try tx.sessionEpochs(of: users) }
                } catch {
                    logger.warning(
                        "cannot read the session epochs of connected users: closing every socket so each signs in again",
                        ["users": "\(users.count)", "error": "\(error)"])
                    execute { [self] io in closeAll(code: 1012, reason: "service restart", io: io) }
                    return
                }
                let logouts = Self.logouts(of: users, epochs: epochs, at: now)
                logger.info(
                    "session epochs read after logouts were lost track of",
                    ["users": "\(users.count)", "logged_out": "\(logouts.count)"])
                guard !logouts.isEmpty else { return }
                for logout in logouts { revoked(logout) }
                execute { [self] io in
                    for logout in logouts { closeSockets(revokedBy: logout, io: io) }
                }
            }
        }
    }

    /// The logouts a sweep acts on: for each user whose epoch is above 0, the one that started it
    /// (it revoked every credential of a smaller epoch); for a user the store no longer has, one
    /// that revokes all (`SessionEpoch.revokesAll`). Users never logged out need none.
    static func logouts(of users: [UserID], epochs: [UserID: SessionEpoch], at now: Date) -> [Logout] {
        users.compactMap { user in
            let epoch = epochs[user] ?? .revokesAll
            return epoch > SessionEpoch(0) ? Logout(userID: user, at: now, epoch: epoch) : nil
        }
    }

    /// Each user with an admitted socket here, once (service thread).
    func connectedUsers() -> [UserID] {
        Array(Set(connections.values.lazy.compactMap { $0.machine.phase == .closing ? nil : $0.machine.userID }))
    }
}
