import Foundation
import Synchronization
import WaybillStorage

/// Salted slow password hashes: `pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>`.
///
/// Hashing takes tens of milliseconds on purpose, so it runs on a `KeyStretchingPool` (a few
/// threads, a bounded queue) and never holds a thread of Swift's small cooperative pool nor
/// spawns a thread per request. The iteration count is stored in each hash, so it can be raised
/// later without breaking existing users.
public struct PasswordHasher: Sendable {
    /// OWASP's 2023 floor for PBKDF2-HMAC-SHA256. Tests may use fewer (`ServerConfiguration`).
    public static let defaultIterations = 210_000
    /// The most iterations a hash may have, made or stored: about 5 s of one core here. A stored
    /// hash claiming more is not one of ours; checked, it raised what every later login costs
    /// (`highest`), unknown emails included, up to 2³¹−1 iterations each: minutes per login, and
    /// the pool full (found by a review, 2026-12-05).
    public static let maxIterations = 10_000_000
    /// The digest length this format stores (SHA-256).
    static let digestLength = 32
    /// Kept within 1…`maxIterations` (set past it, the hashes made could never be read).
    public var iterations: Int { didSet { iterations = Self.bounded(iterations) } }
    private let pool: KeyStretchingPool?
    /// The most iterations any stored hash checked so far had (shared by copies of this hasher).
    ///
    /// Every check costs at least `max(iterations, highest)`: a stored hash with fewer iterations
    /// is padded, and an unknown email burns that many. Without it, hashes made under another
    /// `--password-iterations` answered faster or slower than an unknown email, which told an
    /// attacker which emails exist (found by a review, 2026-12-03). Until a hash with more
    /// iterations than the setting has been checked once, the unknown email costs the setting.
    private let highest = Highest()

    private final class Highest: Sendable {
        let value = Atomic<Int>(0)
    }

    /// `iterations` is kept within 1…`maxIterations`: past it, the hashes made could never be read.
    public init(iterations: Int = PasswordHasher.defaultIterations) {
        self.iterations = Self.bounded(iterations)
        self.pool = nil
    }

    /// A hasher whose checks run on `pool` (the server's own, stopped with it).
    init(iterations: Int, pool: KeyStretchingPool) {
        self.iterations = Self.bounded(iterations)
        self.pool = pool
    }

    private static func bounded(_ iterations: Int) -> Int { min(max(1, iterations), maxIterations) }

    private var workers: KeyStretchingPool { pool ?? .shared }

    /// A new encoded hash of `password` with a fresh 16-byte salt.
    /// - Throws: `KeyStretchingPool.Overloaded` when too many checks are already waiting.
    func hash(_ password: String) async throws -> String {
        let iterations = self.iterations
        return try await workers.run { Self.encode(password, salt: Crypto.randomBytes(16), iterations: iterations) }
    }

    /// Whether `password` matches `encoded`. A malformed `encoded` never matches.
    /// - Throws: `KeyStretchingPool.Overloaded` when too many checks are already waiting.
    func verify(_ password: String, against encoded: String, preferred: Bool = false) async throws -> Bool {
        let configured = iterations, highest = self.highest
        return try await workers.run(preferred: preferred) {
            let parsed = Self.parse(encoded)
            let stored = parsed?.iterations ?? 0
            let seen = highest.value.max(stored, ordering: .relaxed).newValue
            let matched = parsed.map { Self.matches(password, $0) } ?? false
            let floor = max(configured, seen)
            if stored < floor { _ = Crypto.pbkdf2(password: password, salt: [0], iterations: floor - stored) }
            return matched
        }
    }

    /// What a check costs now, in iterations: the setting, or more once a stored hash had more.
    var checkIterations: Int { max(iterations, highest.value.load(ordering: .relaxed)) }

    /// Burns the same time as a real check, so an unknown email answers as slowly as a wrong password.
    /// - Throws: `KeyStretchingPool.Overloaded`, exactly as `verify` would.
    func verifyNothing(_ password: String, preferred: Bool = false) async throws {
        let iterations = checkIterations
        _ = try await workers.run(preferred: preferred) { Crypto.pbkdf2(password: password, salt: [0], iterations: iterations) }
    }

    /// Synchronous hashing for bulk seeding (callers spread it over threads themselves).
    public func hashNow(_ password: String) -> String {
        Self.encode(password, salt: Crypto.randomBytes(16), iterations: iterations)
    }

    static func encode(_ password: String, salt: [UInt8], iterations: Int) -> String {
        let digest = Crypto.pbkdf2(password: password, salt: salt, iterations: iterations)
        return "pbkdf2_sha256$\(iterations)$\(Data(salt).base64EncodedString())$\(Data(digest).base64EncodedString())"
    }

    /// The parts of an encoded hash; `nil` if it is malformed.
    struct Stored {
        var iterations: Int
        var salt: [UInt8]
        var hash: [UInt8]
    }

    static func parse(_ encoded: String) -> Stored? {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pbkdf2_sha256", let iterations = Int(parts[1]), iterations > 0,
            iterations <= maxIterations,
            let salt = Data(base64Encoded: String(parts[2])), !salt.isEmpty,
            // An empty digest compared equal to a PBKDF2 of length 0: any password matched it.
            let hash = Data(base64Encoded: String(parts[3])), hash.count == digestLength
        else { return nil }
        return Stored(iterations: iterations, salt: Array(salt), hash: Array(hash))
    }

    /// Whether `password` matches `stored` (a malformed hash, `parse` gave nil, never does).
    static func matches(_ password: String, _ stored: Stored) -> Bool {
        let actual = Crypto.pbkdf2(password: password, salt: stored.salt, iterations: stored.iterations, length: stored.hash.count)
        return ConstantTime.equals(actual, stored.hash)
    }
}
