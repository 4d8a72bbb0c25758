import Foundation
import Synchronization

/// Counts failed logins per email and refuses more than `limit` inside `window` (answers 429).
final class LoginThrottle: Sendable {
    private let clock: any WallClock
    private let limit: Int
    private let window: TimeInterval
    private let failures = Mutex<[String: [Date]]>([:])

    init(clock: any WallClock, limit: Int = 10, window: TimeInterval = 300) {
        self.clock = clock
        self.limit = limit
        self.window = window
    }

    func allows(_ key: String) -> Bool {
        let cutoff = clock.now().addingTimeInterval(-window)
        return failures.withLock { all in
            let recent = (all[key] ?? []).filter { $0 > cutoff }
            all[key] = recent.isEmpty ? nil : recent
            return recent.count < limit
        }
    }

    func failed(_ key: String) {
        let now = clock.now()
        failures.withLock { all in
            all[key, default: []].append(now)
            if all.count > 10_000 { all.removeAll() }  // bounded memory under a spray of emails
        }
    }
}
