/// Where `JSONReader` (strict RFC 8259, exact numbers) is allowed to read a document differently
/// from Foundation's `JSONDecoder`, which it replaced for broker batches and socket frames.
///
/// Why: the tests that compare the two parsers on thousands of corrupted documents must see a
/// wrong refusal as a failure, not excuse every refusal as "not JSON". Only these categories may
/// differ (docs/DESIGN.md, "Decisions where the SPEC is silent"):
/// - `trailingComma`: `[1,]`, `{"a":1,}` — not JSON; `JSONDecoder` takes them.
/// - `notUTF8`: UTF-16 or UTF-32 text (a NUL byte, or a UTF-16 byte order mark) — the SPEC says
///   UTF-8; `JSONDecoder` detects the other encodings.
/// - `inexactNumber`: a number with a fraction or an exponent and more than 15 significant digits
///   or an exponent past ±300. `JSONDecoder` reads such a number with limited precision, either
///   way: it takes `2.0000000000000001` as 2 and `1e-400` as 0, and refuses
///   `9223372036854775807.0`; `JSONReader` computes the exact value and does the opposite. Below
///   16 significant digits both agree on whether the value is a whole number. A test that meets
///   this category compares the two again on `withInexactNumbersReplaced`, so a number there
///   excuses nothing else in the document.
public enum KnownJSONDifference: Equatable, Sendable {
    case trailingComma, notUTF8, inexactNumber

    /// The first category `bytes` falls in, scanning outside strings; `nil` when the two parsers
    /// must agree on it.
    public static func of(_ bytes: [UInt8]) -> KnownJSONDifference? {
        if bytes.contains(0) || bytes.starts(with: [0xFE, 0xFF]) || bytes.starts(with: [0xFF, 0xFE]) { return .notUTF8 }
        for piece in pieces(of: bytes) {
            switch piece.kind {
            case .string:
                break
            case .number:
                if inexact(bytes[piece.range]) { return .inexactNumber }
            case .other:
                guard bytes[piece.range.lowerBound] == UInt8(ascii: ",") else { break }
                let next = bytes[piece.range.upperBound...].first { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }
                if next == UInt8(ascii: "]") || next == UInt8(ascii: "}") { return .trailingComma }
            }
        }
        return nil
    }

    /// `bytes` with every `inexactNumber` token (outside strings) replaced by `1`: where the two
    /// parsers must agree again.
    public static func withInexactNumbersReplaced(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        for piece in pieces(of: bytes) {
            if piece.kind == .number, inexact(bytes[piece.range]) {
                out.append(UInt8(ascii: "1"))
            } else {
                out += bytes[piece.range]
            }
        }
        return out
    }

    /// `bytes` cut into strings (quotes and escapes included, to the end if unclosed), number
    /// tokens (a run of number bytes from a `-` or a digit) and single other bytes, in order: the
    /// one walk both questions above share.
    private static func pieces(of bytes: [UInt8]) -> [(kind: PieceKind, range: Range<Int>)] {
        var pieces: [(kind: PieceKind, range: Range<Int>)] = []
        var index = 0
        while index < bytes.count {
            let start = index, byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                index += 1
                while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                    index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                }
                index = min(index + 1, bytes.count)
                pieces.append((.string, start..<index))
            } else if byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                while index < bytes.count, numberBytes.contains(bytes[index]) { index += 1 }
                pieces.append((.number, start..<index))
            } else {
                index += 1
                pieces.append((.other, start..<index))
            }
        }
        return pieces
    }

    private enum PieceKind { case string, number, other }

    private static let numberBytes = Array("0123456789+-.eE".utf8)

    private static func inexact(_ token: ArraySlice<UInt8>) -> Bool {
        guard token.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") })
        else { return false }
        let mantissa = token.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
        let digits = mantissa.filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        let significant = digits.drop { $0 == UInt8(ascii: "0") }.reversed().drop { $0 == UInt8(ascii: "0") }
        if significant.count > 15 { return true }
        let exponent = token.dropFirst(mantissa.count + 1).filter { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        return exponent.count > 3 || (Int(String(decoding: exponent, as: UTF8.self)) ?? 0) > 300
    }
}
