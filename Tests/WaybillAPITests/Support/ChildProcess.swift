import Foundation
import Synchronization

/// The `waybill` executable run as a child process, with its output collected line by line.
final class ChildProcess: Sendable {
    private let process: Process
    private let input = Pipe()
    private let stdoutLines = LineBuffer()
    private let stderrLines = LineBuffer()

    private static let launching = Mutex(())

    /// The built `waybill` next to the test bundle (`swift build --build-tests` builds both).
    static var waybillPath: String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("waybill").path
    }

    init(_ arguments: [String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.waybillPath)
        process.arguments = arguments
        process.standardInput = input
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        // One launch at a time in the whole test process: corelibs Foundation's `Process.run()`
        // crashed once (a memmove inside it, SIGSEGV) while test suites launched children in parallel.
        try Self.launching.withLock { _ in try process.run() }
        Self.collect(out.fileHandleForReading, into: stdoutLines)
        Self.collect(err.fileHandleForReading, into: stderrLines)
    }

    var stdout: [String] { stdoutLines.all }
    var stderr: [String] { stderrLines.all }

    /// Writes one line to the child's stdin.
    func type(_ line: String) { input.fileHandleForWriting.write(Data((line + "\n").utf8)) }

    func signal(_ number: Int32) { kill(process.processIdentifier, number) }

    /// Waits for the exit (at most `timeout`); `nil` if it is still running.
    func exitStatus(timeout: Duration = .seconds(10)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while process.isRunning, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.isRunning ? nil : process.terminationStatus
    }

    /// The first stdout line (as JSON) after `index` that satisfies `matches`, waiting at most `timeout`.
    func line(
        after index: Int = 0, timeout: Duration = .seconds(10), where matches: ([String: Any]) -> Bool
    ) async -> (index: Int, object: [String: Any])? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline, !Task.isCancelled {
            let lines = stdout
            for i in index..<max(index, lines.count) {
                if let object = (try? JSONSerialization.jsonObject(with: Data(lines[i].utf8))) as? [String: Any], matches(object) {
                    return (i, object)
                }
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    func terminate() { if process.isRunning { process.terminate() } }

    private static func collect(_ handle: FileHandle, into lines: LineBuffer) {
        let descriptor = handle.fileDescriptor
        let thread = Thread {
            var pending = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                // read(2), not `availableData`: corelibs Foundation traps on EINTR there, and a
                // signal (another child exiting) can interrupt a read at any time.
                let count = buffer.withUnsafeMutableBytes { Glibc.read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                pending += buffer[0..<count]
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    lines.append(line)
                    pending = Data(pending[(newline + 1)...])
                }
            }
        }
        thread.start()
    }
}

/// Lines collected from a child's output, shared between its reader thread and the test.
final class LineBuffer: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
