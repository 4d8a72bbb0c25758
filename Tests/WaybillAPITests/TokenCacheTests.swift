import Foundation
import Testing
import WaybillDomain
import WaybillRealtime
import WaybillStorage

@testable import WaybillAPI

/// `TokenCache`: a logout drops exactly its user's entries through the per-user index (no walk of
/// the whole table), and the index never keeps what the table no longer holds.
struct TokenCacheTests {
    private static func credential(_ user: Int64) -> SocketCredential {
        SocketCredential(
            user: User(id: UserID(user), companyID: CompanyID(1), role: .driver, email: "u\(user)@x", name: "U\(user)"),
            epoch: SessionEpoch(0))
    }

    private static func hash(_ n: Int) -> [UInt8] { Crypto.sha256("token \(n)") }

    private static let until = Date(timeIntervalSince1970: 1_000)

    @Test func forgettingAUserDropsExactlyTheirTokens() {
        var cache = TokenCache()
        for n in 0..<30 { cache.insert(Self.credential(Int64(n % 3)), until: Self.until, for: Self.hash(n)) }
        #expect(cache.count == 30 && cache.indexedUsers == 3)
        cache.forget(UserID(1))
        #expect(cache.count == 20 && cache.indexedUsers == 2)
        for n in 0..<30 {
            #expect((cache[Self.hash(n)] == nil) == (n % 3 == 1), "token \(n)")
            if let entry = cache[Self.hash(n)] { #expect(entry.credential.user.id == UserID(Int64(n % 3))) }
        }
        cache.forget(UserID(1))  // nothing left of theirs: no change
        cache.forget(UserID(9))  // never seen
        #expect(cache.count == 20 && cache.indexedUsers == 2)
    }

    /// A hash seen again for another user (a token cannot change hands, but the index must not
    /// depend on it) moves in the index: forgetting the first user keeps it.
    @Test func aHashCachedAgainForAnotherUserMovesInTheIndex() {
        var cache = TokenCache()
        cache.insert(Self.credential(1), until: Self.until, for: Self.hash(0))
        cache.insert(Self.credential(2), until: Self.until, for: Self.hash(0))
        #expect(cache.indexedUsers == 1)
        cache.forget(UserID(1))
        #expect(cache[Self.hash(0)]?.credential.user.id == UserID(2))
        cache.forget(UserID(2))
        #expect(cache.count == 0 && cache.indexedUsers == 0)
    }

    /// Past its capacity the cache starts over, index included (bounded memory under a flood).
    @Test func pastItsCapacityTheCacheStartsOver() {
        var cache = TokenCache()
        for n in 0..<TokenCache.capacity { cache.insert(Self.credential(Int64(n)), until: Self.until, for: Self.hash(n)) }
        #expect(cache.count == TokenCache.capacity && cache.indexedUsers == TokenCache.capacity)
        cache.insert(Self.credential(7), until: Self.until, for: Self.hash(-1))
        #expect(cache.count == 1 && cache.indexedUsers == 1)
        #expect(cache[Self.hash(-1)]?.credential.user.id == UserID(7))
    }
}
