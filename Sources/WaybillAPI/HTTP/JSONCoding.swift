import Foundation
import WaybillDomain
import WaybillJSON
import WaybillNetwork

/// JSON in and out, with the SPEC's conventions: snake_case keys, ISO 8601 UTC milliseconds, explicit nulls.
enum JSONCoding {
    /// A request body as `T`, read by `JSONReader` and `BodyFields` rather than `JSONDecoder`
    /// (docs/BENCHMARKS.md: "JSONDecoder in the write path"); a fault throws `BodyError`.
    /// An empty body reads as `null` (so "The body must be a JSON object."), as it did before.
    static func decode<T: JSONBodyDecodable>(_ type: T.Type, from request: HTTPRequest) throws(BodyError) -> T {
        var value = JSONValue.null
        if !request.body.isEmpty {
            do { value = try JSONReader.parse(request.body) } catch { throw .malformed }
        }
        return try T(body: BodyFields(body: value))
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]  // stable bytes: list ETags hash them
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.string(date))
        }
        return encoder
    }

    /// A JSON response with `status` for any encodable value.
    static func response<T: Encodable>(_ value: T, status: Int = 200, headers: HTTPHeaders = HTTPHeaders()) throws -> HTTPResponse {
        var all = headers
        all.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: all, body: try bytes(value))
    }

    /// The JSON bytes of `value`: written directly for `JSONWritable` values (orders and lists of them,
    /// the hot answers), through `JSONEncoder` otherwise. Both give the same bytes.
    static func bytes<T: Encodable>(_ value: T) throws -> [UInt8] {
        if let writable = value as? any JSONWritable {
            // Room for an order's detail (about 600 bytes), the answer of every write: from the
            // writer's default of 512 it was regrown once per write.
            var json = JSONByteWriter(capacity: 1024)
            writable.write(to: &json)
            return json.bytes
        }
        return Array(try encoder().encode(value))
    }

    static func error(_ error: APIError) -> HTTPResponse {
        HTTPResponse.jsonError(status: error.status, code: error.code, message: error.message)
    }
}
