import Foundation
import Synchronization

/// What the store's workers know together about the server: up, or down until a retry time.
///
/// Once one worker finds PostgreSQL unreachable (a connect fails or a statement misses its
/// deadline), every call fails fast instead of each waiting out its own deadline; after a
/// backoff (0.2 s doubling to 2 s) exactly one call is let through as a probe, and its success
/// brings everyone back. Failures also bump `generation`, so connections opened before the
/// outage are dropped rather than trusted (a frozen server leaves them looking healthy).
struct PostgresAvailability: Sendable {
    enum Admission: Equatable {
        /// Known up: go ahead.
        case proceed
        /// Known down, backoff over: this call tries the server; report how it went.
        case probe
        /// Known down: fail at once.
        case refuse(retryIn: Duration)
    }

    private(set) var generation = 0
    private var failures = 0
    private var retryAt: ContinuousClock.Instant?
    private var probing = false

    static let initialBackoff: Duration = .milliseconds(200)
    static let maximumBackoff: Duration = .seconds(2)

    var isDown: Bool { retryAt != nil }

    mutating func admit(at now: ContinuousClock.Instant) -> Admission {
        guard let retryAt else { return .proceed }
        if probing || now < retryAt { return .refuse(retryIn: max(.zero, now.duration(to: retryAt))) }
        probing = true
        return .probe
    }

    /// The server answered (even with an error of its own).
    mutating func succeeded() {
        failures = 0
        retryAt = nil
        probing = false
    }

    /// The server could not be reached or did not answer in time.
    mutating func failed(at now: ContinuousClock.Instant) {
        failures += 1
        generation += 1
        probing = false
        let backoff = Self.initialBackoff * (1 << min(failures - 1, 4))
        retryAt = now + min(backoff, Self.maximumBackoff)
    }

    /// A probe ended without reaching the server either way (e.g. its deadline had passed in the
    /// queue): let the next call probe.
    mutating func probeAbandoned() { probing = false }
}

/// `PostgresAvailability` shared by a store's worker threads.
final class PostgresHealth: Sendable {
    private let state = Mutex(PostgresAvailability())
    func admit() -> PostgresAvailability.Admission { state.withLock { $0.admit(at: .now) } }
    func succeeded() { state.withLock { $0.succeeded() } }
    func failed() { state.withLock { $0.failed(at: .now) } }
    func probeAbandoned() { state.withLock { $0.probeAbandoned() } }
    var generation: Int { state.withLock { $0.generation } }
    /// Whether a failure is on record that no success has cleared (tests).
    var isDown: Bool { state.withLock { $0.isDown } }
}
