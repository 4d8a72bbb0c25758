/// A bearer secret (API token or WebSocket ticket). Prints as `<redacted>` wherever it is interpolated,
/// so it cannot reach a log line by accident; only `hash` is ever stored.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The text the client sends. Read it only to hand it to the client.
    public let value: String

    public init(_ value: String) { self.value = value }

    /// A new random secret: 32 bytes from the CSPRNG, URL-safe base64 (43 characters).
    public static func generate() -> Secret { Secret(Crypto.base64URL(Crypto.randomBytes(32))) }

    /// Whether `text` could be a secret from `generate()`: 43 URL-safe base64 characters. Anything
    /// else is refused before it reaches the store (a garbage `?ticket=` costs no write).
    public static func isWellFormed(_ text: String) -> Bool {
        // Over the bytes in place (`withUTF8`): every request with a token asks.
        var text = text
        return text.utf8.count == 43
            && text.withUTF8 { bytes in
                bytes.allSatisfy { c in
                    (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D || c == 0x5F
                }
            }
    }

    /// SHA-256 of the text: what the store keeps and looks up.
    public var hash: [UInt8] { Crypto.sha256(value) }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
