/// Why a request body did not become its request value (`JSONReader`, `BodyFields`).
///
/// The cases are the ones `JSONDecoder`'s `DecodingError` gave for these bodies before
/// (docs/BENCHMARKS.md: "JSONDecoder in the write path"), and `APIError` words them exactly as it
/// worded those: 400 `malformed_json`, `missing_field` or `invalid_field`.
enum BodyError: Error, Equatable {
    /// Not JSON; also a number an integer field cannot hold exactly (`JSONDecoder` said "not valid JSON").
    case malformed
    /// The body is valid JSON but not an object (an empty body counts as `null`).
    case notAnObject
    /// A required field is absent: its dotted path (`title`, `stages.0.kind`).
    case missing(path: String)
    /// A field (or array element) of the wrong JSON type, or `null` where a value is required.
    case wrongType(path: String, expected: Expected)
    /// A string that is not one of the field's values (an unknown `kind` or `status`).
    case invalidValue(path: String)

    /// What a field should have been, as the messages say it.
    enum Expected: Equatable {
        case string, integer, array, object

        /// The words `APIError` used for `JSONDecoder`'s types (an object was "of a different type").
        var phrase: String {
            switch self {
            case .string: "a string"
            case .integer: "an integer"
            case .array: "an array"
            case .object: "of a different type"
            }
        }
    }
}
