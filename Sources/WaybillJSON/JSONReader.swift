/// A strict RFC 8259 JSON parser from bytes to `JSONValue`: request bodies (WaybillAPI) and the
/// broker's batches (`BrokerWireFormat`).
///
/// Why: docs/BENCHMARKS.md, "JSONDecoder in the write path": Foundation's `JSONDecoder` was one of
/// the larger user-space costs of each write, and at low rates its large code ran with cold
/// caches. Request bodies are small (`{"driver_id":3}`), so one pass over the bytes into a small
/// tree, then reading the few fields (`BodyFields`), is all they need.
///
/// The grammar is RFC 8259's, UTF-8 only (SPEC §2: "JSON, UTF-8"):
/// - one leading UTF-8 byte order mark is skipped, as `JSONDecoder` does;
/// - whitespace is space, tab, LF and CR only; nothing but whitespace may follow the value;
/// - strings: every escape of the RFC, `\uXXXX` surrogate pairs combined, a lone surrogate, a raw
///   control character (below U+0020) or invalid UTF-8 is an error;
/// - numbers: RFC grammar (no leading zeros, `+`, `.5`, `1.`, hex, NaN or Infinity);
/// - no trailing commas, comments or single quotes;
/// - at most `maximumDepth` nested arrays and objects (JSONDecoder's limit too), so a hostile body
///   cannot exhaust the stack.
/// Every error is `JSONSyntaxError`: a client only learns that the body is not JSON.
public struct JSONReader {
    /// Nested arrays and objects allowed, the outermost counting as 1 (JSONDecoder's limit, 512).
    public static let maximumDepth = 512

    /// The value of the whole document `bytes`.
    /// - Parameter maximumValues: values (scalars, arrays and objects, at any depth) the document
    ///   may hold; past it parsing stops with an error, before the tree is built (an 8 MiB broker
    ///   message of `[0,0,0,…]` built some 4 million values before its length was checked).
    public static func parse(_ bytes: [UInt8], maximumValues: Int = .max) throws(JSONSyntaxError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONSyntaxError) -> JSONValue in
            var reader = JSONReader(buffer, maximumValues: maximumValues)
            return try reader.document()
        }
    }

    private let bytes: UnsafeBufferPointer<UInt8>
    private var index = 0
    private var depth = 0
    private var valuesLeft: Int

    private init(_ bytes: UnsafeBufferPointer<UInt8>, maximumValues: Int) {
        self.bytes = bytes
        valuesLeft = maximumValues
    }

    private mutating func document() throws(JSONSyntaxError) -> JSONValue {
        if bytes.count >= 3 && bytes[0] == 0xEF && bytes[1] == 0xBB && bytes[2] == 0xBF { index = 3 }
        skipWhitespace()
        let value = try self.value()
        skipWhitespace()
        guard index == bytes.count else { throw .malformed }
        return value
    }

    private mutating func value() throws(JSONSyntaxError) -> JSONValue {
        guard index < bytes.count, valuesLeft > 0 else { throw .malformed }
        valuesLeft -= 1
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw .malformed
        }
    }

    private mutating func object() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        var members: [JSONValue.Member] = []
        skipWhitespace()
        if take(UInt8(ascii: "}")) { return leave(.object(members)) }
        repeat {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw .malformed }
            let key = try string()
            skipWhitespace()
            guard take(UInt8(ascii: ":")) else { throw .malformed }
            skipWhitespace()
            members.append(JSONValue.Member(key: key, value: try value()))
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "}")) else { throw .malformed }
        return leave(.object(members))
    }

    private mutating func array() throws(JSONSyntaxError) -> JSONValue {
        try enter()
        var elements: [JSONValue] = []
        skipWhitespace()
        if take(UInt8(ascii: "]")) { return leave(.array(elements)) }
        repeat {
            skipWhitespace()
            elements.append(try value())
            skipWhitespace()
        } while take(UInt8(ascii: ","))
        guard take(UInt8(ascii: "]")) else { throw .malformed }
        return leave(.array(elements))
    }

    /// Consumes the `[` or `{` at `index`, one level deeper.
    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        guard depth <= Self.maximumDepth else { throw .malformed }
        index += 1
    }

    private mutating func leave(_ value: JSONValue) -> JSONValue {
        depth -= 1
        return value
    }

    /// Consumes `byte` if it is next.
    private mutating func take(_ byte: UInt8) -> Bool {
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    private mutating func literal(_ word: StaticString) throws(JSONSyntaxError) {
        let count = word.utf8CodeUnitCount
        guard bytes.count - index >= count else { throw .malformed }
        for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { throw .malformed }
        index += count
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    // MARK: Strings

    /// The string whose opening quote is at `index`. Without escapes (the usual case) its bytes
    /// are validated as UTF-8 in place; with escapes they are copied and decoded.
    private mutating func string() throws(JSONSyntaxError) -> String {
        index += 1
        let start = index
        var high: UInt8 = 0  // every byte OR-ed: below 0x80, the string is ASCII
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let run = UnsafeBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII is valid UTF-8 as it is: validating it took several times as long as the
                // copy, for every string of every body (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
                if high < 0x80 { return String(decoding: run, as: UTF8.self) }
                guard let text = String(validating: run, as: UTF8.self) else { throw .malformed }
                return text
            }
            if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
            guard byte >= 0x20 else { throw .malformed }
            high |= byte
            index += 1
        }
        throw .malformed
    }

    /// The rest of a string with escapes: `start` is its first byte, `index` at its first `\`.
    private mutating func escapedString(from start: Int) throws(JSONSyntaxError) -> String {
        var decoded = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: "\""):
                guard let text = String(validating: decoded, as: UTF8.self) else { throw .malformed }
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &decoded)
            case 0x00..<0x20:
                throw .malformed
            default:
                decoded.append(byte)
            }
        }
        throw .malformed
    }

    /// One escape after its `\`, appended to `decoded` as UTF-8.
    private mutating func escape(into decoded: inout [UInt8]) throws(JSONSyntaxError) {
        guard index < bytes.count else { throw .malformed }
        let letter = bytes[index]
        index += 1
        switch letter {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(letter)
        case UInt8(ascii: "b"): decoded.append(0x08)
        case UInt8(ascii: "f"): decoded.append(0x0C)
        case UInt8(ascii: "n"): decoded.append(0x0A)
        case UInt8(ascii: "r"): decoded.append(0x0D)
        case UInt8(ascii: "t"): decoded.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = UInt32(try hexQuad())
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed by `\u` and a low one; together one scalar.
                guard bytes.count - index >= 2, bytes[index] == UInt8(ascii: "\\"),
                      bytes[index + 1] == UInt8(ascii: "u") else { throw .malformed }
                index += 2
                let low = UInt32(try hexQuad())
                guard (0xDC00...0xDFFF).contains(low) else { throw .malformed }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw .malformed }  // a lone low surrogate
            decoded.append(contentsOf: UTF8.encode(unicode)!)
        default:
            throw .malformed
        }
    }

    /// The four hex digits at `index`.
    private mutating func hexQuad() throws(JSONSyntaxError) -> UInt16 {
        guard bytes.count - index >= 4 else { throw .malformed }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw .malformed
            }
            value = value << 4 | UInt16(digit)
            index += 1
        }
        return value
    }

    // MARK: Numbers

    /// The number at `index` (RFC grammar), as `.integer` when its exact value is a whole number
    /// `Int64` holds (`JSONNumberValue`), otherwise as `.number` with its text.
    private mutating func number() throws(JSONSyntaxError) -> JSONValue {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        let integerStart = index
        guard index < bytes.count else { throw .malformed }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            guard skipDigits() > 0 else { throw .malformed }
        }
        let integerEnd = index
        var fractionEnd = index
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard skipDigits() > 0 else { throw .malformed }
            fractionEnd = index
        }
        var exponentNegative = false
        var exponentStart = index
        if index < bytes.count && (bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")) {
            index += 1
            if index < bytes.count && (bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-")) {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            exponentStart = index
            guard skipDigits() > 0 else { throw .malformed }
        }
        let parts = JSONNumberValue(
            negative: negative, integer: bytes[integerStart..<integerEnd],
            fraction: bytes[min(integerEnd + 1, fractionEnd)..<fractionEnd],
            exponentNegative: exponentNegative, exponent: bytes[exponentStart..<index])
        if let integer = parts.int64 { return .integer(integer) }
        return .number(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
    }

    /// Skips ASCII digits; how many there were.
    private mutating func skipDigits() -> Int {
        let start = index
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") { index += 1 }
        return index - start
    }
}

/// The bytes are not one JSON document (the reader says no more: a client learns only that).
public struct JSONSyntaxError: Error, Equatable {
    public init() {}
    static let malformed = JSONSyntaxError()
}
