/// A deterministic random number generator (SplitMix64) for tests: the same seed gives the same numbers.
///
/// Pass it wherever code takes `inout some RandomNumberGenerator` so jittered delays are reproducible.
public struct SeededGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// A generator whose sequence is fixed by `seed`.
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension SeededGenerator {
    /// Bytes a JSON parser's edge cases hide behind: digits, number signs, quotes, escapes,
    /// structure, the letters of the literals, whitespace and a few others.
    public static let jsonAlphabet = Array("0123456789-.eE+\"\\,:[]{}nultrfase _xz".utf8)

    /// `bytes` with `edits` random edits, each replacing, inserting or removing one byte (an
    /// inserted or replacing byte from `alphabet`): the differential tests of the JSON readers
    /// compare two parsers on thousands of these.
    public mutating func corrupted(_ bytes: [UInt8], edits: Int, alphabet: [UInt8] = jsonAlphabet) -> [UInt8] {
        var mutated = bytes
        for _ in 0..<edits {
            let position = Int(next() % UInt64(mutated.count))
            let byte = alphabet[Int(next() % UInt64(alphabet.count))]
            switch next() % 3 {
            case 0: mutated[position] = byte
            case 1: mutated.insert(byte, at: position)
            default: if mutated.count > 1 { mutated.remove(at: position) }
            }
        }
        return mutated
    }
}
