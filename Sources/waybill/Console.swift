import Foundation
import WaybillObservability

/// Writes to the terminal without touching C's global `FILE*`s (not concurrency-safe in Swift 6).
enum Console {
    /// After the log lines queued before it (`LogWriter`), which would otherwise follow it.
    static func error(_ text: String) {
        LogWriter.flushStandardError(timeout: .seconds(1))
        try? FileHandle.standardError.write(contentsOf: Data((text + "\n").utf8))
    }
    static func out(_ text: String) { write(Data((text + "\n").utf8)) }

    /// Writes `data` to stdout; a reader that went away (`waybill driver --json | head`: EPIPE, with
    /// SIGPIPE ignored for the sockets) ends the process quietly instead of trapping in `FileHandle.write`.
    static func write(_ data: Data) {
        do { try FileHandle.standardOutput.write(contentsOf: data) } catch { exit(0) }
    }
}
