import Dispatch
import Foundation

/// Salted slow password hashes: `pbkdf2_sha256$<iterations>$<salt b64>$<hash b64>`.
///
/// Hashing takes tens of milliseconds on purpose, so it runs on its own queue and never holds a
/// thread of Swift's small cooperative pool. The iteration count is stored in each hash, so it can
/// be raised later without breaking existing users.
public struct PasswordHasher: Sendable {
    /// OWASP's 2023 floor for PBKDF2-HMAC-SHA256. Tests may use fewer (`ServerConfiguration`).
    public static let defaultIterations = 210_000
    public var iterations: Int
    private static let queue = DispatchQueue(label: "waybill.password-hashing", attributes: .concurrent)

    public init(iterations: Int = PasswordHasher.defaultIterations) { self.iterations = iterations }

    /// A new encoded hash of `password` with a fresh 16-byte salt.
    public func hash(_ password: String) async -> String {
        let iterations = self.iterations
        return await Self.offload { Self.encode(password, salt: Crypto.randomBytes(16), iterations: iterations) }
    }

    /// Whether `password` matches `encoded`. A malformed `encoded` never matches.
    public func verify(_ password: String, against encoded: String) async -> Bool {
        await Self.offload { Self.matches(password, encoded) }
    }

    /// Burns the same time as a real check, so an unknown email answers as slowly as a wrong password.
    public func verifyNothing(_ password: String) async {
        let iterations = self.iterations
        _ = await Self.offload { Crypto.pbkdf2(password: password, salt: [0], iterations: iterations) }
    }

    /// Synchronous hashing for bulk seeding (callers spread it over threads themselves).
    public func hashNow(_ password: String) -> String {
        Self.encode(password, salt: Crypto.randomBytes(16), iterations: iterations)
    }

    static func encode(_ password: String, salt: [UInt8], iterations: Int) -> String {
        let digest = Crypto.pbkdf2(password: password, salt: salt, iterations: iterations)
        return "pbkdf2_sha256$\(iterations)$\(Data(salt).base64EncodedString())$\(Data(digest).base64EncodedString())"
    }

    static func matches(_ password: String, _ encoded: String) -> Bool {
        let parts = encoded.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "pbkdf2_sha256", let iterations = Int(parts[1]), iterations > 0,
            let salt = Data(base64Encoded: String(parts[2])), let expected = Data(base64Encoded: String(parts[3]))
        else { return false }
        let actual = Crypto.pbkdf2(password: password, salt: Array(salt), iterations: iterations, length: expected.count)
        return Crypto.constantTimeEquals(actual, Array(expected))
    }

    private static func offload<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in queue.async { continuation.resume(returning: work()) } }
    }
}
