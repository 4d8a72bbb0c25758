import Foundation

/// Writes to the terminal without touching C's global `FILE*`s (not concurrency-safe in Swift 6).
enum Console {
    static func error(_ text: String) { FileHandle.standardError.write(Data((text + "\n").utf8)) }
    static func out(_ text: String) { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }
}
