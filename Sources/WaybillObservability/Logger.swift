import Foundation
import WaybillText
import Synchronization

/// One structured line per event, in logfmt: `ts=… level=info msg="request" method=GET path=/api/orders/ …`.
///
/// Messages are constant text and data goes in fields, so a line never carries a secret that a
/// field did not name. Paths must be passed through `Redaction.redactedTarget` first.
public final class Logger: Sendable {
    public enum Level: String, Sendable { case debug, info, warning, error }

    private let sink: @Sendable (String) -> Void
    /// Where lines go as bytes (`writeLine`), when they go to a `LogWriter` other than stderr's.
    private let writer: LogWriter?
    /// Lines go to stderr's writer (the default sink), as bytes too: looked up when a line is
    /// written, so a logger that never writes never starts that writer's thread.
    private let toStandardError: Bool
    private let minimum: Level
    /// Fields appended to every line (e.g. `node=…` when several nodes share one log pipeline).
    private let context: [(String, String)]

    /// - Parameter sink: where lines go; stderr by default (tests capture them).
    public init(minimum: Level = .info, sink: (@Sendable (String) -> Void)? = nil) {
        self.minimum = minimum
        self.sink = sink ?? Logger.standardError
        self.writer = nil
        self.toStandardError = sink == nil
        self.context = []
    }

    /// A logger whose lines go to `writer` (tests: a writer on a file of their own).
    convenience init(minimum: Level = .info, writer: LogWriter) {
        self.init(minimum: minimum, sink: { writer.append($0) }, writer: writer, toStandardError: false, context: [])
    }

    private init(
        minimum: Level, sink: @escaping @Sendable (String) -> Void, writer: LogWriter?, toStandardError: Bool,
        context: [(String, String)]
    ) {
        self.minimum = minimum
        self.sink = sink
        self.writer = writer
        self.toStandardError = toStandardError
        self.context = context
    }

    /// A logger writing to the same place that adds `fields` to every line.
    public func adding(_ fields: KeyValuePairs<String, String>) -> Logger {
        Logger(
            minimum: minimum, sink: sink, writer: writer, toStandardError: toStandardError,
            context: context + fields.map { ($0.key, $0.value) })
    }

    public func debug(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.debug, message, fields) }
    public func info(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.info, message, fields) }
    public func warning(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.warning, message, fields) }
    public func error(_ message: String, _ fields: KeyValuePairs<String, String> = [:]) { log(.error, message, fields) }

    public func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>) {
        log(level, message, fields, at: Date())
    }

    /// `log` at a given time (tests).
    func log(_ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>, at now: Date) {
        guard Self.rank(level) >= Self.rank(minimum) else { return }
        if let writer = writer ?? (toStandardError ? LogWriter.standardError : nil),
            Self.writeLine(level, message, fields, context: context, at: now, to: writer)
        {
            return
        }
        sink(Self.line(level, message, fields, context: context, at: now))
    }

    /// One line as `log` writes it, without its newline.
    static func line(
        _ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>, context: [(String, String)] = [],
        at now: Date = Date()
    ) -> String {
        // Built in one string with room reserved: every request writes a line (the access log).
        var line = ""
        line.reserveCapacity(192)
        line += "ts="
        Self.appendTimestamp(now, to: &line)
        line += " level="
        line += level.rawValue
        line += " msg="
        Self.appendQuoted(message, to: &line)
        for (key, value) in fields { Self.appendField(key, value, to: &line) }
        for (key, value) in context { Self.appendField(key, value, to: &line) }
        return line
    }

    /// Puts `line(…)`'s bytes straight into `writer`'s buffer, when every value is ASCII without
    /// controls and the line fits `writeLineCapacity`; otherwise writes nothing and returns `false`
    /// (the caller builds the line as a string, which handles everything).
    ///
    /// Why: every request writes an access line, and building it as a `String` (appends that grow
    /// and check it, the time stamp made into strings) and then copying it into the writer cost about
    /// 2 µs per request (docs/BENCHMARKS.md, 2026-12-07 (11:10– UTC)).
    static func writeLine(
        _ level: Level, _ message: String, _ fields: KeyValuePairs<String, String>, context: [(String, String)],
        at now: Date, to writer: LogWriter
    ) -> Bool {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: writeLineCapacity) { out -> Bool in
            var at = 0
            /// `text` as it is (keys, the level: never quoted, as in `line`).
            func raw(_ text: String) -> Bool {
                var text = text
                return text.withUTF8 { bytes in
                    guard at + bytes.count <= out.count else { return false }
                    for byte in bytes {
                        out[at] = byte
                        at += 1
                    }
                    return true
                }
            }
            /// `text` as `appendQuoted` writes it, for printable ASCII; `false` for anything else.
            func value(_ text: String) -> Bool {
                var text = text
                return text.withUTF8 { bytes in
                    var quoted = bytes.isEmpty, escapes = 0
                    for byte in bytes {
                        guard byte >= 0x20 && byte < 0x7f else { return false }  // a control or not ASCII
                        if !isPlain(byte) { quoted = true }
                        if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { escapes += 1 }
                    }
                    guard at + bytes.count + escapes + (quoted ? 2 : 0) <= out.count else { return false }
                    if quoted {
                        out[at] = UInt8(ascii: "\"")
                        at += 1
                    }
                    for byte in bytes {
                        // `\` and `"` only matter inside quotes: a plain value has neither `"` nor,
                        // escaped or not, anything `appendQuoted` would change.
                        if quoted && (byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")) {
                            out[at] = UInt8(ascii: "\\")
                            at += 1
                        }
                        out[at] = byte
                        at += 1
                    }
                    if quoted {
                        out[at] = UInt8(ascii: "\"")
                        at += 1
                    }
                    return true
                }
            }
            guard raw("ts=") else { return false }
            writeTimestamp(now, into: UnsafeMutableBufferPointer(rebasing: out[at..<at + 24]))
            at += 24
            guard raw(" level="), raw(level.rawValue), raw(" msg="), value(message) else { return false }
            for (key, text) in fields {
                guard raw(" "), raw(key), raw("="), value(text) else { return false }
            }
            for (key, text) in context {
                guard raw(" "), raw(key), raw("="), value(text) else { return false }
            }
            writer.append(bytes: UnsafeBufferPointer(rebasing: out[0..<at]))
            return true
        }
    }

    /// The longest line `writeLine` writes (an access line is about 150 bytes).
    static let writeLineCapacity = 1024

    private static func appendField(_ key: String, _ value: String, to line: inout String) {
        line += " "
        line += key
        line += "="
        appendQuoted(value, to: &line)
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
        var out = ""
        appendQuoted(value, to: &out)
        return out
    }

    static func appendQuoted(_ value: String, to out: inout String) {
        guard needsQuotes(value) else {
            out += value
            return
        }
        out += "\""
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
        out += "\""
    }

    private static func needsQuotes(_ value: String) -> Bool {
        guard !value.isEmpty else { return true }
        // Printable ASCII other than space, `"` and `=` (paths, ids, numbers: nearly every value)
        // is decided on the bytes; anything else by scalar (C1 controls and U+2028/9 are not ASCII).
        var value = value
        let plain = value.withUTF8 { bytes in bytes.allSatisfy(isPlain) }
        if plain { return false }
        return value.unicodeScalars.contains { $0 == " " || $0 == "\"" || $0 == "=" || isControl($0) }
    }

    /// A byte a value may hold without quotes: printable ASCII other than space, `"` and `=`
    /// (`needsQuotes`, and `writeLine`, which takes printable ASCII only).
    private static func isPlain(_ byte: UInt8) -> Bool {
        byte > 0x20 && byte < 0x7f && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "=")
    }

    /// C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the bidirectional
    /// marks and overrides (U+061C, U+200E/F, U+202A…E, U+2066…9): a path holding them reordered a line as
    /// `tail` or `journalctl` showed it (found by a review, 2026-12-05).
    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        let value = scalar.value
        return value < 0x20 || (0x7f...0x9f).contains(value) || value == 0x2028 || value == 0x2029
            || value == 0x061c || value == 0x200e || value == 0x200f || (0x202a...0x202e).contains(value) || (0x2066...0x2069).contains(value)
    }

    /// Lines go to stderr through a thread of their own (`LogWriter`): a stderr that stops
    /// draining never holds the thread that logs.
    private static let standardError: @Sendable (String) -> Void = { line in LogWriter.standardError.append(line) }
}

extension Logger {
    /// ISO 8601 in UTC with milliseconds, like the API's timestamps (the same `ASCIIText` writes
    /// both): `2026-12-02T04:05:06.789Z`. Every request writes a line, and `Date.formatted` with an
    /// `ISO8601FormatStyle` cost more than the rest of the line (measured, docs/BENCHMARKS.md):
    /// the calendar arithmetic is done on integers instead.
    static func timestamp(_ date: Date) -> String {
        var text = ""
        appendTimestamp(date, to: &text)
        return text
    }

    /// Appends `timestamp(date)` to `line` without a buffer or string of its own: the 24 bytes are
    /// put together on the stack and appended as two strings of 12, which Swift keeps inline (up to
    /// 15 bytes), where one array and one 24-byte string were two allocations per log line, that
    /// is per request (counted with a `malloc` probe, docs/BENCHMARKS.md, 2026-12-06 10:21–).
    static func appendTimestamp(_ date: Date, to line: inout String) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { bytes in
            writeTimestamp(date, into: bytes)
            line += String(decoding: UnsafeMutableBufferPointer(rebasing: bytes[0..<12]), as: UTF8.self)
            line += String(decoding: UnsafeMutableBufferPointer(rebasing: bytes[12..<24]), as: UTF8.self)
        }
    }

    /// Writes the 24 bytes of `2026-12-02T04:05:06.789Z` into `out` (`ASCIIText.writeTimestamp`).
    private static func writeTimestamp(_ date: Date, into out: UnsafeMutableBufferPointer<UInt8>) {
        // Truncated to the millisecond like `ISO8601FormatStyle`, but from the nearest microsecond:
        // `.789` is a hair below 0.789 in binary, and flooring that directly would print `.788`.
        let micros = Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
        let millis = micros >= 0 ? micros / 1000 : (micros - 999) / 1000
        // A clock set past year 9999 (or before year 0) prints that year's end: four digits always.
        let clamped = min(max(millis, ASCIIText.earliestTimestamp), ASCIIText.latestTimestamp)
        ASCIIText.writeTimestamp(millisecondsSince1970: clamped, into: out)
    }
}
