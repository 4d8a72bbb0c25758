import CCrypto
import Foundation

/// The few libcrypto primitives Waybill needs: randomness, SHA-256, PBKDF2, constant-time compare.
enum Crypto {
    /// `count` bytes from OpenSSL's CSPRNG.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let ok = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        precondition(ok == 1, "RAND_bytes failed: no secure randomness available")
        return bytes
    }

    /// SHA-256 of `bytes` (`waybill_sha256` in the C shim says why not `EVP_Digest`).
    static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        // Hashed in place when the bytes are contiguous (a String's UTF-8, an Array): no copy.
        if let digest = bytes.withContiguousStorageIfAvailable(digest) { return digest }
        return Array(bytes).withUnsafeBufferPointer(digest)
    }

    static func sha256(_ text: String) -> [UInt8] { sha256(text.utf8) }

    private static func digest(_ input: UnsafeBufferPointer<UInt8>) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Int(SHA256_DIGEST_LENGTH)) { out, count in
            // A null base address (an empty buffer) is fine with a length of 0.
            precondition(waybill_sha256(input.baseAddress, input.count, out.baseAddress) == 1, "SHA-256 failed")
            count = Int(SHA256_DIGEST_LENGTH)
        }
    }

    /// PBKDF2-HMAC-SHA256 of `password` with `salt`: slow on purpose (see `PasswordHasher`).
    static func pbkdf2(password: String, salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let pass = Array(password.utf8).map { CChar(bitPattern: $0) } + [0]  // never empty: safe base address
        let ok = pass.withUnsafeBufferPointer { p in
            salt.withUnsafeBufferPointer { s in
                out.withUnsafeMutableBufferPointer { o in
                    PKCS5_PBKDF2_HMAC(
                        // Clamped, never trapping: the edges refuse settings out of range, and a
                        // library user's 0 must not stop the process at a login.
                        p.baseAddress, Int32(pass.count - 1), s.baseAddress, Int32(salt.count),
                        Int32(clamping: max(1, iterations)),
                        EVP_sha256(), Int32(length), o.baseAddress)
                }
            }
        }
        precondition(ok == 1, "PKCS5_PBKDF2_HMAC failed")
        return out
    }

    /// URL-safe base64 without padding: tokens and tickets travel in headers and query strings.
    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
