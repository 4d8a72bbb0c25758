import Testing
import WaybillStorage

/// The one comparison every secret check uses (stores' token and ticket hashes, the API's
/// password hashes and metrics token).
struct ConstantTimeTests {
    @Test func equalBytesMatchAndAnyDifferenceDoesNot() {
        let secret: [UInt8] = Array(0..<32)
        #expect(ConstantTime.equals(secret, secret))
        #expect(ConstantTime.equals([], []))
        for index in secret.indices {
            var guess = secret
            guess[index] ^= 0x01
            #expect(!ConstantTime.equals(secret, guess), "a difference at byte \(index)")
        }
        #expect(!ConstantTime.equals(secret, Array(secret.dropLast())))
        #expect(!ConstantTime.equals(secret, secret + [0]))
    }
}
