import Foundation
import Synchronization

/// One structured line per event, in logfmt: `ts=… level=info msg="request" method=GET path=/api/orders/ …`.
///
/// Messages are constant text and data goes in fields, so a line never carries a secret that a
/// field did not name. Paths must be passed through `Redaction.redactedTarget` first.
public final class Logger: Sendable {
    public enum Level: String, Sendable { case debug, info, warning, error }

    private let sink: @Sendable (String) -> Void
    private let minimum: Level
    /// Fields appended to every line (e.g. `node=…` when several nodes share one log pipeline).
    private let context: [(String, String)]

    /// - Parameter sink: where lines go; stderr by default (tests capture them).
    public init(minimum: Level = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.sink = sink ?? Logger.standardError
        self.context = []
    }

    private init(minimum: Level, sink: @escaping @Sendable (String) -> Void, context: [(String, String)]) {
        self.minimum = minimum
        self.sink = sink
        self.context = context
    }

    /// A logger writing to the same place that adds `fields` to every line.
    public func adding(_ fields: KeyValuePairs<String, String>) -> Logger {
        Logger(minimum: minimum, sink: sink, context: context + fields.map { ($0.key, $0.value) })
    }

    public func debug(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, message, fields) }

    public func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>) {
        guard Self.rank(level) >= Self.rank(minimum) else { return }
        var line = "ts=\(Self.timestamp(Date())) level=\(level.rawValue) msg=\(Self.quote(message))"
        for (key, value) in fields { line += " \(key)=\(Self.quote(value))" }
        for (key, value) in context { line += " \(key)=\(Self.quote(value))" }
        sink(line)
    }

    private static func rank(_ level: Level) -> Int {
        switch level {
        case .debug: 0
        case .info: 1
        case .warning: 2
        case .error: 3
        }
    }

    /// The value as one logfmt token: quoted when needed, with every control character escaped,
    /// so a value can never end the line or start a forged one (`\r` too: some viewers treat a
    /// bare carriage return as a line break).
    static func quote(_ value: String) -> String {
        let needsQuotes = value.isEmpty || value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || isControl($0) }
        guard needsQuotes else { return value }
        var out = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if isControl(scalar) {
                    out += "\\u{" + String(scalar.value, radix: 16) + "}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    /// C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7f...0x9f).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }

    private static let stderrLock = Mutex(())
    private static let standardError: @Sendable (String) -> Void = { line in
        let bytes = Array((line + "\n").utf8)
        stderrLock.withLock { _ in _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) } }
    }
}

extension Logger {
    /// ISO 8601 in UTC with milliseconds, like the API's timestamps (Observability depends on nothing).
    static func timestamp(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
    }
}
