/// Decodes a `Transfer-Encoding: chunked` request body as it arrives in pieces.
///
/// lws 4.1 hands chunked bodies over raw (framing included) and never reports their end, so the
/// server decodes them itself and answers when the terminal chunk and trailers are in.
struct ChunkedBodyDecoder {
    /// What the decoder needs next.
    enum Progress: Equatable {
        case needMore
        case complete
        case tooLarge
        case malformed
    }

    private enum State {
        case size(value: Int, digits: Int)  // reading hex digits
        case sizeExtension(value: Int)  // after ';' until CRLF
        case sizeLF(value: Int)
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailerLineStart  // after the last chunk: empty line ends, anything else is a trailer
        case trailerLine
        case trailerLF(isEmptyLine: Bool)
        case done
        case failed
    }

    private var state = State.size(value: 0, digits: 0)
    /// Bytes of chunk extensions and trailers so far: they carry nothing the server reads, and
    /// without a bound a client could stream them for ever without reaching `limit`.
    private var ignoredBytes = 0
    static let maxIgnoredBytes = 16 << 10
    /// The decoded body so far.
    private(set) var body: [UInt8] = []
    let limit: Int

    init(limit: Int) { self.limit = limit }

    private mutating func countIgnored() -> Progress? {
        ignoredBytes += 1
        guard ignoredBytes > Self.maxIgnoredBytes else { return nil }
        state = .failed
        return .tooLarge
    }

    /// Feeds the next raw piece of the body.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Progress {
        var i = 0
        while i < bytes.count {
            let byte = bytes[i]
            switch state {
            case .done: return .complete
            case .failed: return .malformed
            case .size(let value, let digits):
                if let digit = Self.hexValue(byte) {
                    guard digits < 15 else { return fail() }
                    state = .size(value: value * 16 + digit, digits: digits + 1)
                } else if digits > 0 && byte == UInt8(ascii: ";") {
                    state = .sizeExtension(value: value)
                } else if digits > 0 && byte == UInt8(ascii: "\r") {
                    state = .sizeLF(value: value)
                } else {
                    return fail()
                }
                i += 1
            case .sizeExtension(let value):
                if byte == UInt8(ascii: "\r") { state = .sizeLF(value: value) }
                i += 1
                if let result = countIgnored() { return result }
            case .sizeLF(let value):
                guard byte == UInt8(ascii: "\n") else { return fail() }
                if value == 0 {
                    state = .trailerLineStart
                } else {
                    guard body.count + value <= limit else {
                        state = .failed
                        return .tooLarge
                    }
                    state = .data(remaining: value)
                }
                i += 1
            case .data(let remaining):
                let n = min(remaining, bytes.count - i)
                body.append(contentsOf: bytes[i..<i + n])
                i += n
                state = remaining - n == 0 ? .dataCR : .data(remaining: remaining - n)
            case .dataCR:
                guard byte == UInt8(ascii: "\r") else { return fail() }
                state = .dataLF
                i += 1
            case .dataLF:
                guard byte == UInt8(ascii: "\n") else { return fail() }
                state = .size(value: 0, digits: 0)
                i += 1
            case .trailerLineStart:
                state = byte == UInt8(ascii: "\r") ? .trailerLF(isEmptyLine: true) : .trailerLine
                i += 1
            case .trailerLine:
                if byte == UInt8(ascii: "\r") { state = .trailerLF(isEmptyLine: false) }
                i += 1
                if let result = countIgnored() { return result }
            case .trailerLF(let isEmptyLine):
                guard byte == UInt8(ascii: "\n") else { return fail() }
                state = isEmptyLine ? .done : .trailerLineStart
                i += 1
            }
        }
        switch state {
        case .done: return .complete
        case .failed: return .malformed
        default: return .needMore
        }
    }

    private mutating func fail() -> Progress {
        state = .failed
        return .malformed
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): Int(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): Int(byte - UInt8(ascii: "a")) + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): Int(byte - UInt8(ascii: "A")) + 10
        default: nil
        }
    }
}
