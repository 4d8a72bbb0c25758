/// A bearer secret (API token or WebSocket ticket). Prints as `<redacted>` wherever it is interpolated,
/// so it cannot reach a log line by accident; only `hash` is ever stored.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The text the client sends. Read it only to hand it to the client.
    public let value: String

    public init(_ value: String) { self.value = value }

    /// A new random secret: 32 bytes from the CSPRNG, URL-safe base64 (43 characters).
    public static func generate() -> Secret { Secret(Crypto.base64URL(Crypto.randomBytes(32))) }

    /// SHA-256 of the text: what the store keeps and looks up.
    public var hash: [UInt8] { Crypto.sha256(value) }

    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
}
