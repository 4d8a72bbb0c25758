/// A request body type read from JSON by `JSONReader` and `BodyFields` instead of `Decodable`.
///
/// Why: docs/BENCHMARKS.md, "JSONDecoder in the write path". `JSONCoding.decode` parses the body,
/// checks it is an object and hands its fields to `init(body:)`, which reads them in the order
/// `Decodable`'s synthesized initializer read them (that of the type's `CodingKeys`), so the first
/// error reported for a body with several is the same as before.
protocol JSONBodyDecodable {
    init(body: BodyFields) throws(BodyError)
}
