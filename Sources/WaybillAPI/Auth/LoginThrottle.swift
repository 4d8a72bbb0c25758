import Foundation
import WaybillStorage

/// Refuses more than `limit` failed logins per email inside `window` (429), counted in the store
/// so that every node shares one count (N nodes do not allow N× the attempts).
///
/// An attempt is counted as a failure the moment it starts (before the slow password check) and
/// taken back if it succeeds, so a burst of parallel guesses cannot all slip past the limit; the
/// store serializes reservations for one key.
final class LoginThrottle: Sendable {
    private let store: any OrderStore
    private let clock: any WallClock
    private let limit: Int
    private let window: TimeInterval

    init(store: any OrderStore, clock: any WallClock, limit: Int = 10, window: TimeInterval = 300) {
        self.store = store
        self.clock = clock
        self.limit = limit
        self.window = window
    }

    /// Reserves an attempt for `key`; `nil` when the limit is reached. Pass the token to
    /// `succeeded` if the login works.
    /// - Throws: `StoreError` when the store cannot count (the login answers 503).
    func begin(_ key: String) async throws -> Date? {
        let now = clock.now(), limit = self.limit, window = self.window
        let reserved = try await store.write { tx in
            try tx.reserveLoginAttempt(key: key, at: now, window: window, limit: limit)
        }
        return reserved ? now : nil
    }

    /// Takes back the attempt reserved at `started`: it was not a failure.
    func succeeded(_ key: String, started: Date) async throws {
        try await store.write { tx in try tx.releaseLoginAttempt(key: key, at: started) }
    }
}
