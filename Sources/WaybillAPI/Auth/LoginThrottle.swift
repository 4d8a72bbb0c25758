import Foundation
import WaybillDomain
import WaybillStorage

/// Limits failed logins per email *and* per client address inside `window` (429), counted in the
/// store so that every node shares one count (N nodes do not allow N× the attempts).
///
/// An attempt is counted as a failure the moment it starts (before the slow password check) and
/// taken back if it succeeds, so a burst of parallel guesses cannot all slip past a limit; the
/// store serializes reservations for one key.
///
/// - Per address (`addressLimit`, higher than per email): one client cannot spray guesses over
///   many emails. The address is the socket's peer, or behind a proxy named in `--trusted-proxy`
///   the entry that proxy added to `X-Forwarded-For` (`ClientAddress`); a client's own header is
///   never believed. IPv6 addresses count by their /64 (`ClientAddress.throttleKey`).
/// - Per email (`emailLimit`): many clients cannot guess one password. A full email counter
///   alone would let a stranger lock the owner out, so an address (an IPv6 one by its /64) that
///   has not tried **this email** inside the window may still try it once: if the password is
///   right it logs in, if not that try is spent. One IPv6 /48 (`ClientAddress.wideKey`) gets at
///   most `passesPerWideBlock` such tries per email. An attacker therefore gets one extra guess per
///   IPv4 address, or 16 per /48, per window — the price of not handing them a lock-out button (see
///   docs/HARDENING.md). Before 2026-12-04 the pass went to addresses with no failures at all: an
///   office or a carrier NAT, where someone always mistypes something, was locked out by a
///   stranger, and a /48 held 65 536 fresh /64s, each a try.
final class LoginThrottle: Sendable {
    /// What `begin` decided.
    enum Decision: Equatable {
        /// Go ahead; pass the attempt to `succeeded` (or `abandoned`) afterwards.
        case allowed(Attempt)
        /// Refused: too many failures from this address (`byAddress`, whatever the email) or for this
        /// email from an address that is not clean. Both answer the same 429.
        case limited(byAddress: Bool)
    }

    /// The reservations one login made, to take back if it was no failure.
    struct Attempt: Equatable {
        var started: Date
        var keys: [String]
        /// The address had no failures nor attempts in flight: its check may go ahead of a flood's.
        var fromCleanAddress: Bool
    }

    private let store: any OrderStore
    private let clock: any WallClock
    private let emailLimit: Int
    private let addressLimit: Int
    /// Locked-email tries one IPv6 /48 gets per email and window: more than one, so that a stranger
    /// on the same carrier's /48 cannot spend the owner's try with one request; few, so that a /48
    /// is not 65 536 guesses.
    static let passesPerWideBlock = 16
    /// In seconds, as the store counts (it compares stored `Date`s).
    private let window: TimeInterval

    init(
        store: any OrderStore, clock: any WallClock, emailLimit: Int = 10, addressLimit: Int = 50,
        window: Duration = .seconds(300)
    ) {
        self.store = store
        self.clock = clock
        self.emailLimit = emailLimit
        self.addressLimit = max(addressLimit, 1)
        self.window = window.timeInterval
    }

    /// Reserves an attempt for `email` (lower-cased by the caller) from `address`.
    /// - Throws: `StoreError` when the store cannot count (the login answers 503 when it is unavailable).
    func begin(email: String, address: String) async throws -> Decision {
        let now = clock.now(), window = self.window, emailLimit = self.emailLimit, addressLimit = self.addressLimit
        let client = address.isEmpty ? "unknown" : ClientAddress.throttleKey(address)
        let addressKey = "address:" + client, pairKey = "pair:" + client + " " + email
        // IPv6 only: for IPv4 the block is the address, and the pair key already counts it.
        let block = address.isEmpty ? client : ClientAddress.wideKey(address)
        let blockKey = block == client ? nil : "block:" + block + " " + email
        let passesPerBlock = Self.passesPerWideBlock
        return try await store.write { tx in
            /// Counts an attempt under `key` whatever it holds; whether it had room under `limit`.
            func count(_ key: String, within limit: Int) throws -> Bool {
                if try tx.reserveLoginAttempt(key: key, at: now, window: window, limit: limit) { return true }
                _ = try tx.reserveLoginAttempt(key: key, at: now, window: window, limit: .max)
                return false
            }
            // A limit of 1 succeeds only when the key has nothing counted: "clean", "first try here".
            let clean = try tx.reserveLoginAttempt(key: addressKey, at: now, window: window, limit: 1)
            if !clean {
                guard try tx.reserveLoginAttempt(key: addressKey, at: now, window: window, limit: addressLimit) else {
                    return .limited(byAddress: true)
                }
            }
            // Every attempt at this email from here is counted, so an address that helped lock it
            // (or tried it already) gets no pass below, nor a /48 that had its passes.
            let firstHere = try count(pairKey, within: 1)
            let blockHasRoom = try blockKey.map { try count($0, within: passesPerBlock) } ?? true
            let counted = [addressKey, pairKey] + (blockKey.map { [$0] } ?? [])
            if try tx.reserveLoginAttempt(key: email, at: now, window: window, limit: emailLimit) {
                return .allowed(Attempt(started: now, keys: counted + [email], fromCleanAddress: clean))
            }
            // The email is locked: one try per address that has not tried it yet (and the /48 has room).
            if firstHere && blockHasRoom { return .allowed(Attempt(started: now, keys: counted, fromCleanAddress: clean)) }
            // Refused without a password check: this is no failure, so the address keeps its quota
            // (a driver retrying a locked email would otherwise lock every login from a shared NAT).
            for key in counted { try tx.releaseLoginAttempt(key: key, at: now) }
            return .limited(byAddress: false)
        }
    }

    /// Takes back the attempt: the password was right, or it was never checked (overload).
    func release(_ attempt: Attempt) async throws {
        try await store.write { tx in
            for key in attempt.keys { try tx.releaseLoginAttempt(key: key, at: attempt.started) }
        }
    }
}
