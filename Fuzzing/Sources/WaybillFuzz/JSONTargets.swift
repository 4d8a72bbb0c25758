import Foundation
import WaybillJSON
@testable import WaybillAPI

extension FuzzTarget {
    /// `JSONReader`, the request body parser (docs/BENCHMARKS.md: "JSONDecoder in the write
    /// path"): the whole input is one body.
    ///
    /// Checks, for what it accepts: written back out (`FuzzJSON.canonical`) it reads back to the
    /// same value; and `JSONDecoder`, which it replaced and which is more lenient, accepts it too
    /// and reads the same nulls, booleans, strings (byte for byte), whole numbers, arrays and
    /// objects (first member of a key).
    static let jsonReader = FuzzTarget(name: "json-reader", summary: "the request body JSON parser") { input in
        let bytes = input.rest()
        guard let value = try? JSONReader.parse(bytes) else { return }
        let canonical = FuzzJSON.canonical(value)
        FuzzCheck.expect((try? JSONReader.parse(canonical)) == value, "no round trip: \(String(decoding: canonical, as: UTF8.self))")
        // Codable recursion is deep per level: compare reasonably shallow documents only.
        guard FuzzJSON.depth(value) <= 64 else { return }
        let foundation = try? JSONDecoder().decode(FuzzJSON.DecoderReading.self, from: Data(bytes))
        FuzzCheck.expect(foundation != nil, "JSONDecoder refused what JSONReader read")
        if let foundation { FuzzCheck.expect(FuzzJSON.same(value, foundation), "JSONDecoder read \(foundation)") }
    }
}

/// Helpers of the `json-reader` target.
enum FuzzJSON {
    /// Any JSON value as `JSONDecoder` reads it.
    enum DecoderReading: Decodable {
        case null, bool(Bool), string(String), array([DecoderReading]), object([String: DecoderReading])
        /// A number, with its `Int64` value if `JSONDecoder` gives one.
        case number(Int64?)

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if container.decodeNil() {
                self = .null
            } else if let value = try? container.decode(Bool.self) {
                self = .bool(value)
            } else if let value = try? container.decode(String.self) {
                self = .string(value)
            } else if let value = try? container.decode([DecoderReading].self) {
                self = .array(value)
            } else if let value = try? container.decode([String: DecoderReading].self) {
                self = .object(value)
            } else {
                self = .number(try? container.decode(Int64.self))
            }
        }
    }

    /// Whether the two readings agree. Numbers: a whole number below 2^53 must be the same;
    /// past that, or with a fraction, `JSONDecoder` rounds through `Double` and `Decimal`
    /// where `JSONReader` is exact, so only "it is a number" is compared.
    static func same(_ value: JSONValue, _ foundation: DecoderReading) -> Bool {
        switch (value, foundation) {
        case (.null, .null): return true
        case (.bool(let mine), .bool(let theirs)): return mine == theirs
        case (.string(let mine), .string(let theirs)): return mine.utf8.elementsEqual(theirs.utf8)
        case (.integer(let mine), .number(let theirs)): return mine.magnitude >= 1 << 53 || theirs == mine
        case (.number, .number): return true
        case (.array(let mine), .array(let theirs)):
            return mine.count == theirs.count && zip(mine, theirs).allSatisfy { same($0, $1) }
        case (.object(let members), .object(let theirs)):
            var first: [String: JSONValue] = [:]
            for member in members where first[member.key] == nil { first[member.key] = member.value }
            return first.count == theirs.count && first.allSatisfy { key, mine in theirs[key].map { same(mine, $0) } ?? false }
        default: return false
        }
    }

    static func depth(_ value: JSONValue) -> Int {
        switch value {
        case .array(let elements): 1 + (elements.map(depth).max() ?? 0)
        case .object(let members): 1 + (members.map { depth($0.value) }.max() ?? 0)
        default: 0
        }
    }

    /// `value` as compact JSON (strings escaped as the API writes them, `JSONByteWriter`).
    static func canonical(_ value: JSONValue) -> [UInt8] {
        var bytes: [UInt8] = []
        write(value, to: &bytes)
        return bytes
    }

    private static func write(_ value: JSONValue, to bytes: inout [UInt8]) {
        switch value {
        case .null: bytes += Array("null".utf8)
        case .bool(let flag): bytes += Array((flag ? "true" : "false").utf8)
        case .integer(let integer): bytes += Array(String(integer).utf8)
        case .number(let text): bytes += Array(text.utf8)
        case .string(let text): write(text, to: &bytes)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element, to: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(member.key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                write(member.value, to: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static func write(_ text: String, to bytes: inout [UInt8]) {
        var json = JSONByteWriter(capacity: text.utf8.count + 2)
        json.string(text)
        bytes += json.bytes
    }
}
