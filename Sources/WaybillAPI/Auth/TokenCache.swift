import Foundation
import WaybillDomain
import WaybillRealtime

/// The `Authenticator`'s cache of recently seen tokens (by their SHA-256), with each user's token
/// hashes beside it, so a logout drops its user's entries without walking every entry (up to
/// `capacity`) under the cache's lock, as a filter over the whole table did.
struct TokenCache {
    typealias Entry = (credential: SocketCredential, until: Date)

    /// Past this many entries the cache starts over: bounded memory, whatever tokens a flood sends.
    static let capacity = 10_000

    private var entries: [[UInt8]: Entry] = [:]
    private var hashesByUser: [UserID: Set<[UInt8]>] = [:]

    var count: Int { entries.count }

    subscript(hash: [UInt8]) -> Entry? { entries[hash] }

    /// Keeps `credential` for the token hashed `hash` until `until`.
    mutating func insert(_ credential: SocketCredential, until: Date, for hash: [UInt8]) {
        if entries.count >= Self.capacity { removeAll() }
        let user = credential.user.id
        if let old = entries[hash]?.credential.user.id, old != user { drop(hash, of: old) }
        entries[hash] = (credential, until)
        hashesByUser[user, default: []].insert(hash)
    }

    /// Drops every entry of `user`.
    mutating func forget(_ user: UserID) {
        guard let hashes = hashesByUser.removeValue(forKey: user) else { return }
        for hash in hashes { entries[hash] = nil }
    }

    mutating func removeAll() {
        entries.removeAll()
        hashesByUser.removeAll()
    }

    /// Users with entries (tests: the index holds no user whose entries are gone).
    var indexedUsers: Int { hashesByUser.count }

    private mutating func drop(_ hash: [UInt8], of user: UserID) {
        hashesByUser[user]?.remove(hash)
        if hashesByUser[user]?.isEmpty == true { hashesByUser[user] = nil }
    }
}
