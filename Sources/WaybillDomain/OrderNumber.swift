public import Foundation

/// Human order numbers, `YYYY/MM/NNNN`, counted per company and month.
public enum OrderNumber {
    /// The year and month (UTC) that prefix numbers of orders created at `date`.
    public static func period(of date: Date) -> (year: Int, month: Int) {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month], from: date)
        return (parts.year ?? 1970, parts.month ?? 1)
    }

    /// The number text for the `sequence`-th order of a period; at least four digits.
    public static func format(year: Int, month: Int, sequence: Int) -> String {
        let seq = String(sequence)
        let padded = String(repeating: "0", count: max(0, 4 - seq.count)) + seq
        let mm = month < 10 ? "0\(month)" : "\(month)"
        return "\(year)/\(mm)/\(padded)"
    }
}
