import WaybillNetwork

/// The `Idempotency-Key` header of a write (SPEC §2): 1–255 printable ASCII characters.
struct IdempotencyKey: Sendable, Hashable {
    static let maxLength = 255

    let value: String

    /// The request's key; `nil` when it sent none. An empty header counts as none: the network
    /// layer does not keep empty header values, so it cannot be told apart from no header.
    /// - Throws: 400 `invalid_header` for a longer key or one with a character outside 0x20–0x7E.
    static func parse(_ request: HTTPRequest) throws -> IdempotencyKey? {
        guard let value = request.headers["idempotency-key"], !value.isEmpty else { return nil }
        let bytes = value.utf8
        guard bytes.count <= maxLength, bytes.allSatisfy({ (0x20...0x7E).contains($0) }) else {
            throw APIError.invalidIdempotencyKey
        }
        return IdempotencyKey(value: value)
    }
}

extension APIError {
    static let invalidIdempotencyKey = APIError(
        400, "invalid_header", "Idempotency-Key must be 1 to 255 printable ASCII characters.")
    /// The first request with the key has not finished yet: retrying a moment later gets its answer.
    static let idempotencyKeyInUse = APIError(
        409, "idempotency_key_in_use", "A request with this Idempotency-Key is still running; retry shortly.",
        retryAfter: 1)
    static let idempotencyKeyReused = APIError(
        422, "idempotency_key_reused",
        "This Idempotency-Key was already used for another request (method, path or body); use a new key.")
}
