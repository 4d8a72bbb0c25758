import Foundation
import Synchronization

/// Counts login attempts per email and refuses more than `limit` failures inside `window` (429).
///
/// An attempt is counted as a failure the moment it starts (before the slow password check) and
/// taken back if it succeeds, so a burst of parallel guesses cannot all slip past the limit.
final class LoginThrottle: Sendable {
    private let clock: any WallClock
    private let limit: Int
    private let window: TimeInterval
    private let attempts = Mutex<[String: [Date]]>([:])
    /// Keys kept before expired ones are swept; far more than 2 cores can fail PBKDF2 logins for in a window.
    private let maxKeys = 100_000

    init(clock: any WallClock, limit: Int = 10, window: TimeInterval = 300) {
        self.clock = clock
        self.limit = limit
        self.window = window
    }

    /// Reserves an attempt for `key`; `nil` when the limit is reached. Pass the token to
    /// `succeeded` if the login works.
    func begin(_ key: String) -> Date? {
        let now = clock.now(), cutoff = now.addingTimeInterval(-window)
        return attempts.withLock { all in
            let recent = (all[key] ?? []).filter { $0 > cutoff }
            guard recent.count < limit else {
                all[key] = recent
                return nil
            }
            all[key] = recent + [now]
            if all.count > maxKeys { all = all.filter { $0.value.contains { $0 > cutoff } } }
            return now
        }
    }

    /// Takes back the attempt reserved at `started`: it was not a failure.
    func succeeded(_ key: String, started: Date) {
        attempts.withLock { all in
            guard var list = all[key], let index = list.lastIndex(of: started) else { return }
            list.remove(at: index)
            all[key] = list.isEmpty ? nil : list
        }
    }
}
