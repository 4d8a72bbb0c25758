/// Structured values read off the front of libFuzzer's bytes (in the spirit of LLVM's
/// `FuzzedDataProvider`): a few choice bytes, then newline-separated text, then the rest.
///
/// Text is split on `\n` so that seed files stay readable (a seed for `api-request` looks like an
/// HTTP request). Reading past the end yields zeros and empty strings, never a trap.
struct FuzzInput {
    private var bytes: ArraySlice<UInt8>

    init(_ bytes: [UInt8]) { self.bytes = bytes[...] }

    var isEmpty: Bool { bytes.isEmpty }

    /// The next byte, or 0 when none is left.
    mutating func byte() -> UInt8 { bytes.popFirst() ?? 0 }

    /// One of `options`, chosen by the next byte.
    mutating func pick<T>(_ options: [T]) -> T { options[Int(byte()) % options.count] }

    /// The bytes up to the next `\n` (which is consumed), or all that is left.
    mutating func lineBytes() -> [UInt8] {
        guard let newline = bytes.firstIndex(of: UInt8(ascii: "\n")) else {
            defer { bytes = [] }
            return Array(bytes)
        }
        defer { bytes = bytes[(newline + 1)...] }
        return Array(bytes[..<newline])
    }

    /// The next line as text (invalid UTF-8 repaired, as `String(decoding:)` does on the server).
    mutating func line() -> String { String(decoding: lineBytes(), as: UTF8.self) }

    /// Everything not read yet.
    mutating func rest() -> [UInt8] {
        defer { bytes = [] }
        return Array(bytes)
    }

    /// Everything not read yet, as text.
    mutating func restText() -> String { String(decoding: rest(), as: UTF8.self) }
}
