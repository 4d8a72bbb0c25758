import WaybillJSON

/// The fields of one JSON object in a request body, read with the errors `JSONDecoder` gave.
///
/// Why: docs/BENCHMARKS.md, "JSONDecoder in the write path". These accessors are the few
/// `KeyedDecodingContainer` calls the request types made, with the same outcomes:
/// - a required field that is absent → `missing`; `null` or the wrong JSON type → `wrongType`;
/// - an optional field that is absent or `null` → `nil` (`decodeIfPresent`), otherwise as required;
/// - a number an integer field cannot hold exactly (`1.5`, `1e400`) → `wrongType` ("must be an
///   integer"): `JSONDecoder` called the whole body invalid JSON, which sent clients looking for a
///   syntax error that is not there (found by a review, the one difference on purpose);
/// - the first member with a key counts; unknown keys are ignored.
/// `path` is the object's dotted path (`""` for the body, `stages.0` for a stage): built into a
/// message only when a field fails.
struct BodyFields {
    private let members: [JSONValue.Member]
    let path: String

    /// The fields of the whole body, which must be an object.
    init(body: JSONValue) throws(BodyError) {
        guard case .object(let members) = body else { throw .notAnObject }
        self.members = members
        self.path = ""
    }

    private init(members: [JSONValue.Member], path: String) {
        self.members = members
        self.path = path
    }

    func string(_ key: String) throws(BodyError) -> String {
        try string(key, in: required(key))
    }

    func optionalString(_ key: String) throws(BodyError) -> String? {
        guard let value = optional(key) else { return nil }
        return try string(key, in: value)
    }

    func int64(_ key: String) throws(BodyError) -> Int64 {
        try int64(key, in: required(key))
    }

    func optionalInt64(_ key: String) throws(BodyError) -> Int64? {
        guard let value = optional(key) else { return nil }
        return try int64(key, in: value)
    }

    /// A string-backed enum (`StageKind`, `OrderStatus`); an unknown string is `invalidValue`.
    func value<Value: RawRepresentable>(_ type: Value.Type, _ key: String) throws(BodyError) -> Value
    where Value.RawValue == String {
        guard let value = Value(rawValue: try string(key)) else { throw .invalidValue(path: field(key)) }
        return value
    }

    /// The same, optional: absent or `null` is `nil`.
    func optionalValue<Value: RawRepresentable>(_ type: Value.Type, _ key: String) throws(BodyError) -> Value?
    where Value.RawValue == String {
        guard optional(key) != nil else { return nil }
        return try value(type, key)
    }

    /// An optional array of objects, each read by `element` with its own path (`stages.0`).
    func optionalObjects<Element>(
        _ key: String, _ element: (BodyFields) throws(BodyError) -> Element
    ) throws(BodyError) -> [Element]? {
        guard let value = optional(key) else { return nil }
        guard case .array(let items) = value else { throw .wrongType(path: field(key), expected: .array) }
        var elements: [Element] = []
        elements.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            let itemPath = field(key) + "." + String(index)
            guard case .object(let members) = item else { throw .wrongType(path: itemPath, expected: .object) }
            elements.append(try element(BodyFields(members: members, path: itemPath)))
        }
        return elements
    }

    // MARK: One value

    /// The first member named `key`, `nil` if there is none.
    private func member(_ key: String) -> JSONValue? {
        for member in members where member.key == key { return member.value }
        return nil
    }

    private func required(_ key: String) throws(BodyError) -> JSONValue {
        guard let value = member(key) else { throw .missing(path: field(key)) }
        return value
    }

    /// The member's value; `nil` when absent or `null`.
    private func optional(_ key: String) -> JSONValue? {
        guard let value = member(key) else { return nil }
        if case .null = value { return nil }
        return value
    }

    private func string(_ key: String, in value: JSONValue) throws(BodyError) -> String {
        guard case .string(let text) = value else { throw .wrongType(path: field(key), expected: .string) }
        return text
    }

    private func int64(_ key: String, in value: JSONValue) throws(BodyError) -> Int64 {
        switch value {
        case .integer(let integer): return integer
        default: throw .wrongType(path: field(key), expected: .integer)  // `.number` too: not an integer
        }
    }

    /// The dotted path of the member `key`.
    private func field(_ key: String) -> String {
        path.isEmpty ? key : path + "." + key
    }
}
