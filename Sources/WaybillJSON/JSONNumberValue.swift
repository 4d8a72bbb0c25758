/// The exact value of a JSON number's digits, when it is a whole number `Int64` holds.
///
/// Why exact arithmetic: request bodies carry ids (`driver_id`, a stage's `id`). `JSONDecoder`
/// (which this replaces, docs/BENCHMARKS.md: "JSONDecoder in the write path") reads `3`, `3.0` and
/// `3e0` alike for an `Int64`, so this does too; but it reads other forms through `Double` or
/// `Decimal` and accepts some numbers that are not whole (`1.0000000000000001` → 1, `1e-400` → 0).
/// Computing from the digits accepts exactly the numbers whose value IS a whole `Int64`, with no
/// rounding anywhere (docs/DESIGN.md, "Decisions where the SPEC is silent").
struct JSONNumberValue {
    typealias Digits = Slice<UnsafeBufferPointer<UInt8>>

    /// Past this an exponent only decides "too large" or "not whole"; saturating keeps the
    /// arithmetic from overflowing on `1e99999999999999999999`.
    private static let exponentCap = 1_000_000_000_000_000  // 10^15

    let negative: Bool
    /// ASCII digits before the point (`0` or no leading zero, as the grammar ensures).
    let integer: Digits
    /// ASCII digits after the point (empty without one).
    let fraction: Digits
    let exponentNegative: Bool
    /// ASCII digits of the exponent (empty without one).
    let exponent: Digits

    /// The value, or `nil` if it is not a whole number or lies outside `Int64`.
    var int64: Int64? {
        if fraction.isEmpty && exponent.isEmpty { return Self.signed(Self.magnitude(of: integer), negative: negative) }
        // Significant digits: integer part then fraction, times 10^scale.
        var scale = exponent.reduce(0) { min($0 * 10 + Int($1 - UInt8(ascii: "0")), Self.exponentCap) }
        if exponentNegative { scale = -scale }
        scale -= fraction.count
        let digits = Array(integer) + Array(fraction)
        guard let first = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }) else { return 0 }
        let last = digits.lastIndex(where: { $0 != UInt8(ascii: "0") })!
        scale += digits.count - 1 - last
        // Trailing zeros went into the scale, so a negative one means a fraction remains.
        guard scale >= 0, last - first + 1 + scale <= 19 else { return nil }
        guard var magnitude = digits[first...last].withUnsafeBufferPointer({ Self.magnitude(of: $0[...]) }) else {
            return nil
        }
        for _ in 0..<scale {
            let (product, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            magnitude = product
        }
        return Self.signed(magnitude, negative: negative)
    }

    /// The digits as an unsigned number, `nil` on overflow.
    private static func magnitude(of digits: Digits) -> UInt64? {
        var value: UInt64 = 0
        for digit in digits {
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
            guard !overflow1, !overflow2 else { return nil }
            value = sum
        }
        return value
    }

    private static func signed(_ magnitude: UInt64?, negative: Bool) -> Int64? {
        guard let magnitude else { return nil }
        if negative {
            if magnitude == UInt64(Int64.max) + 1 { return Int64.min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }
}
