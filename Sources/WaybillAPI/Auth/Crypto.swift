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

    /// SHA-256 fetched once: the one-shot `SHA256()` looks the algorithm up in OpenSSL 3's
    /// provider tables on every call, half of its cost on a 40-byte token (measured: every
    /// authenticated request hashes its token). Read-only after the fetch, so shared by all threads.
    private nonisolated(unsafe) static let sha256Digest: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    static func sha256(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
        let input = Array(bytes)
        let ok = input.withUnsafeBufferPointer { inBuf in
            digest.withUnsafeMutableBufferPointer { out in
                // If the fetch failed (no provider loaded then), the legacy handle still works.
                EVP_Digest(inBuf.baseAddress, input.count, out.baseAddress, nil, sha256Digest ?? EVP_sha256(), nil)
            }
        }
        precondition(ok == 1, "EVP_Digest(SHA-256) failed")
        return digest
    }

    static func sha256(_ text: String) -> [UInt8] { sha256(Array(text.utf8)) }

    /// PBKDF2-HMAC-SHA256 of `password` with `salt`: slow on purpose (see `PasswordHasher`).
    static func pbkdf2(password: String, salt: [UInt8], iterations: Int, length: Int = 32) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: length)
        let pass = Array(password.utf8).map { CChar(bitPattern: $0) } + [0]  // never empty: safe base address
        let ok = pass.withUnsafeBufferPointer { p in
            salt.withUnsafeBufferPointer { s in
                out.withUnsafeMutableBufferPointer { o in
                    PKCS5_PBKDF2_HMAC(
                        p.baseAddress, Int32(pass.count - 1), s.baseAddress, Int32(salt.count), Int32(iterations),
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
