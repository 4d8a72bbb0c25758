internal import Foundation

/// JSON coding as the server speaks it: snake_case keys (spelled in each `CodingKeys`) and ISO 8601 dates
/// with or without milliseconds.
enum WireJSON {
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            if let date = parseDate(text) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO 8601 date: \(text)")
        }
        return decoder
    }

    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date))
        }
        return encoder
    }

    static func parseDate(_ text: String) -> Date? {
        if let date = try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(text) { return date }
        return try? Date.ISO8601FormatStyle().parse(text)
    }

    /// Decodes `data` as `T`, turning any failure into ``WaybillClientError/badResponse``.
    static func decode<T: Decodable>(_ type: T.Type, from data: Data, what: String) throws(WaybillClientError) -> T {
        do {
            return try decoder().decode(type, from: data)
        } catch {
            throw .badResponse("cannot read \(what)")
        }
    }

    /// A JSON object body from string fields.
    static func body(_ fields: [String: String]) -> Data {
        (try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data()
    }
}
