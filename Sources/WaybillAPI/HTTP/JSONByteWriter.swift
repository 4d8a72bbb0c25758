import Foundation
import WaybillDomain
import WaybillText

/// A value that writes its own JSON, byte for byte what `JSONCoding.encoder()` would produce.
///
/// Why: Foundation's `JSONEncoder` was the largest single user-space cost of a write (12 % of the
/// server's CPU at 1 000 writes/s, `perf record`; docs/BENCHMARKS.md): every order answer went
/// through keyed containers, boxing, a key sort and a `String(format:)` per date. The order types
/// the API answers with most write straight into bytes instead. `JSONCoding.response` takes this path
/// for any `JSONWritable` (and arrays of them); the `Encodable` conformances stay, and a test holds
/// the two encodings byte-identical (list ETags hash these bytes).
protocol JSONWritable {
    func write(to json: inout JSONByteWriter)
}

extension Array: JSONWritable where Element: JSONWritable {
    func write(to json: inout JSONByteWriter) {
        json.array(self) { json, element in element.write(to: &json) }
    }
}

/// Appends JSON tokens to a byte buffer, with `JSONEncoder`'s conventions for this API: keys are
/// written by the caller in sorted order, `/` is not escaped, control characters are (`\b \t \n \f \r`,
/// others as lowercase `\u00XX`), other characters go out as UTF-8, nil is an explicit `null`.
struct JSONByteWriter {
    private(set) var bytes: [UInt8] = []
    /// Whether the innermost open object or array has no member yet.
    private var isFirst = true

    init(capacity: Int = 512) { bytes.reserveCapacity(capacity) }

    mutating func object(_ body: (inout JSONByteWriter) -> Void) {
        bytes.append(UInt8(ascii: "{"))
        let outer = isFirst
        isFirst = true
        body(&self)
        isFirst = outer
        bytes.append(UInt8(ascii: "}"))
    }

    mutating func array<C: Collection>(_ items: C, _ element: (inout JSONByteWriter, C.Element) -> Void) {
        bytes.append(UInt8(ascii: "["))
        var first = true
        for item in items {
            if !first { bytes.append(UInt8(ascii: ",")) }
            first = false
            element(&self, item)
        }
        bytes.append(UInt8(ascii: "]"))
    }

    /// `"key":` (keys are ASCII constants that need no escaping).
    mutating func key(_ name: StaticString) {
        if !isFirst { bytes.append(UInt8(ascii: ",")) }
        isFirst = false
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    mutating func null() { bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C]) }  // "null"

    /// Every number an answer carries is an `Int64` (ids) or an `Int` (versions, positions).
    mutating func int(_ value: Int64) {
        // Digits straight into the buffer, by the hot paths' one decimal writer (`String(value)`
        // would allocate per number): room for the longest made at the end, then the unused part
        // let go.
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: ASCIIText.longestDecimal))
        let end = bytes.withUnsafeMutableBufferPointer { ASCIIText.writeDecimal(value, into: $0, at: start) }
        bytes.removeLast(bytes.count - end)
    }

    mutating func int(_ value: Int) { int(Int64(value)) }

    mutating func int(_ value: Int64?) {
        if let value { int(value) } else { null() }
    }

    mutating func int(_ value: Int?) { int(value.map(Int64.init)) }

    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Runs that need no escape go in whole, from the string's own bytes (`withUTF8`): byte by
        // byte through `text.utf8`'s iterator (unspecialized, a call per byte) this was most of
        // an answer's JSON.
        var text = text
        text.withUTF8 { source in
            var start = 0
            for index in source.indices where source[index] < 0x20 || source[index] == 0x22 || source[index] == 0x5C {
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[start..<index]))
                escape(source[index])
                start = index + 1
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: source[start...]))
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// One byte of a string's text, escaped if JSON needs it.
    private mutating func escape(_ byte: UInt8) {
        switch byte {
        case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
        case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
        case 0x08: bytes.append(contentsOf: [0x5C, UInt8(ascii: "b")])
        case 0x09: bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
        case 0x0A: bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
        case 0x0C: bytes.append(contentsOf: [0x5C, UInt8(ascii: "f")])
        case 0x0D: bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
        case 0x00..<0x20:
            bytes.append(contentsOf: [0x5C, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
            bytes.append(Self.hexDigit(byte >> 4))
            bytes.append(Self.hexDigit(byte & 0x0F))
        default: bytes.append(byte)
        }
    }

    mutating func string(_ text: String?) {
        if let text { string(text) } else { null() }
    }

    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// A date as the API writes it (`Timestamp`, UTC milliseconds), or `null`.
    mutating func date(_ date: Date?) {
        guard let date else { null(); return }
        bytes.append(UInt8(ascii: "\""))
        Timestamp.append(date, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }
}
