import CWebSockets
import Foundation
import WaybillObservability

/// Routes lws's own log lines to standard error, with secrets removed.
///
/// lws logs request URLs in some error paths; WebSocket URLs carry `?token=` and `?ticket=`
/// (SPEC §4), which must never reach a log. The level is process-wide in lws, hence `static`.
enum LwsLog {
    /// Errors only; call before any context is created. Idempotent.
    static func install() {
        lws_set_log_level(LLL_ERR, lwsLogEmit)
    }

    /// The credentials' names (`Redaction.secretNames`, as the client's `EventSocketRequest`).
    private static let keys: [[UInt8]] = Redaction.secretNames.sorted().map { Array(($0 + "=").utf8) }
    /// Bytes that may precede an argument name (so `mytoken=` is left alone).
    private static let separators = Set("?&;, \t\"'(/".utf8)
    /// Bytes that end an argument value.
    private static let terminators = Set("& \t\r\n\"';#,)".utf8)

    /// Replaces the value of every `token=`, `ticket=`, `access_token=` and `password=` argument
    /// (any case) with `[redacted]`.
    static func redact(_ line: String) -> String {
        let bytes = Array(line.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let atBoundary = i == 0 || separators.contains(bytes[i - 1])
            if atBoundary, let key = keys.first(where: { matches(bytes, at: i, $0) }) {
                out += bytes[i..<i + key.count]
                out += Array("[redacted]".utf8)
                i += key.count
                while i < bytes.count, !terminators.contains(bytes[i]) { i += 1 }
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func matches(_ bytes: [UInt8], at start: Int, _ key: [UInt8]) -> Bool {
        guard start + key.count <= bytes.count else { return false }
        for (offset, k) in key.enumerated() {
            var byte = bytes[start + offset]
            if byte >= 65 && byte <= 90 { byte += 32 }  // ASCII lower-case
            if byte != k { return false }
        }
        return true
    }
}

/// lws's log emitter (a C function pointer, so a top-level `func`). Runs on whatever thread logs,
/// the service thread mostly: through the log's own thread, like every other line (a stderr that
/// stops draining must not stop the service thread; lws logs an error per failed `accept` when
/// descriptors run out, found by a review).
func lwsLogEmit(_ level: Int32, _ line: UnsafePointer<CChar>?) {
    guard let line else { return }
    var text = LwsLog.redact(String(cString: line))
    while text.hasSuffix("\n") { text.removeLast() }
    LogWriter.standardError.append("[lws] " + text)
}
