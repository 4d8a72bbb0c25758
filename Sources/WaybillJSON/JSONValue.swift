/// One parsed JSON value, as `JSONReader` gives it: a small tree the request bodies are read from.
///
/// Why not Foundation's `JSONDecoder`: docs/BENCHMARKS.md, "JSONDecoder in the write path" (its
/// keyed containers and large code were a major user-space cost of each write). The tree keeps
/// what the body decoding needs and nothing else:
/// - objects keep their members in document order, duplicates included; `BodyFields` takes the FIRST
///   member with the key, as `JSONDecoder` does;
/// - a number whose exact value is a whole number that `Int64` holds is `.integer` (so `3`, `-0`,
///   `3.0` and `3e2` are integers, as `JSONDecoder` reads them for an `Int64` field); any other
///   number is `.number` with its text (`1.5`, `1e400`, `9223372036854775808`).
public enum JSONValue: Equatable, Sendable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([Member])

    /// The value of this object's first member named `key` (the member `JSONDecoder` reads when
    /// a key repeats); `nil` when there is none or this is not an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// One `"key": value` of an object.
    public struct Member: Equatable, Sendable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

}
