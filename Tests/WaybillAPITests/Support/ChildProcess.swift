import Foundation
import Synchronization
import WaybillTesting

/// The `waybill` executable run as a child process, with its output collected line by line.
///
/// Started with `posix_spawn`, not Foundation's `Process`: corelibs' `Process.run()` crashed the
/// test process now and then (SIGSEGV in a memmove inside it, with or without other launches at the
/// same time), and a crash takes every test of the run with it.
final class ChildProcess: Sendable {
    let pid: pid_t
    /// The write end of the child's stdin; -1 once closed (`closeInput`).
    private let stdinDescriptor: Atomic<Int32>
    private let stdoutLines = LineBuffer()
    private let stderrLines = LineBuffer()
    /// The exit status once reaped (an exit code, or 128 + the signal), `nil` while running.
    private let reaped = Mutex<Int32?>(nil)
    /// Signalled by `resumeStderr` (see `init`'s `pausingStderrAfter`).
    private let stderrResumed = DispatchSemaphore(value: 0)

    /// The built `waybill` next to the test bundle (`swift build --build-tests` builds both).
    static var waybillPath: String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        return bundle.appendingPathComponent("waybill").path
    }

    /// The test process's environment without its `WAYBILL_*` settings (a developer's exported
    /// `WAYBILL_INSECURE_HTTP` or `WAYBILL_DATABASE_URL` changed what the tests' commands did), with
    /// `XDG_STATE_HOME` in a folder of this test run: `waybill driver` keeps its queue file there,
    /// not in the real home (a review, 2026-12-07, found its lock files in `~/.local/state`).
    /// Folders of earlier runs whose process is gone are deleted here.
    static let environment: [String: String] = {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("WAYBILL_") }
        let temporary = FileManager.default.temporaryDirectory
        let prefix = "waybill-test-state-"
        for name in (try? FileManager.default.contentsOfDirectory(atPath: temporary.path)) ?? [] where name.hasPrefix(prefix) {
            guard let pid = pid_t(name.dropFirst(prefix.count)), kill(pid, 0) != 0, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(at: temporary.appendingPathComponent(name))
        }
        let state = temporary.appendingPathComponent("\(prefix)\(getpid())")
        try? FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        environment["XDG_STATE_HOME"] = state.path
        return environment
    }()

    /// - Parameters:
    ///   - pausingStderrAfter: stop reading the child's stderr after the first line that contains
    ///     this (a stuck log collector: its writes fill the pipe) until `resumeStderr`.
    ///   - openFileLimit: runs it under `prlimit` (util-linux) with this many descriptors, soft and
    ///     hard (the server raises its soft limit to the hard one).
    init(_ arguments: [String], pausingStderrAfter marker: String? = nil, openFileLimit: Int? = nil) throws {
        var input: [Int32] = [-1, -1], output: [Int32] = [-1, -1], errors: [Int32] = [-1, -1]
        guard pipe(&input) == 0, pipe(&output) == 0, pipe(&errors) == 0 else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        for descriptor in input + output + errors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        let pid: pid_t
        do throws(Spawn.Failure) {
            // The child's ends are the parent's to close whether or not the start worked.
            defer {
                close(input[0])
                close(output[1])
                close(errors[1])
            }
            // dup2 clears close-on-exec on the copies; every other descriptor of the test process
            // (pipes and sockets of other tests) is close-on-exec or closed by `Spawn`.
            let command =
                openFileLimit.map { ["/usr/bin/prlimit", "--nofile=\($0):\($0)", "--", Self.waybillPath] } ?? [Self.waybillPath]
            pid = try Spawn.start(command[0], Array(command.dropFirst()) + arguments, environment: Self.environment) { actions in
                posix_spawn_file_actions_adddup2(&actions, input[0], 0)
                posix_spawn_file_actions_adddup2(&actions, output[1], 1)
                posix_spawn_file_actions_adddup2(&actions, errors[1], 2)
            }
        } catch {
            close(input[1])
            close(output[0])
            close(errors[0])
            throw POSIXError(POSIXErrorCode(rawValue: error.code) ?? .EIO)
        }
        self.pid = pid
        stdinDescriptor = Atomic(input[1])
        Self.collect(output[0], into: stdoutLines)
        Self.collect(errors[0], into: stderrLines, pausingAfter: marker, until: stderrResumed)
    }

    /// Reads stderr again after `pausingStderrAfter`.
    func resumeStderr() { stderrResumed.signal() }

    deinit {
        closeInput()
        if isRunning { kill(pid, SIGKILL) }
        _ = isRunning  // reaps it if it has ended
    }

    var stdout: [String] { stdoutLines.all }
    var stderr: [String] { stderrLines.all }

    /// Ends the child's stdin (it reads EOF), as a script's pipe or `/dev/null` would.
    func closeInput() {
        let descriptor = stdinDescriptor.exchange(-1, ordering: .acquiringAndReleasing)
        if descriptor >= 0 { close(descriptor) }
    }

    /// Writes one line to the child's stdin.
    func type(_ line: String) {
        let stdinDescriptor = self.stdinDescriptor.load(ordering: .acquiring)
        guard stdinDescriptor >= 0 else { return }
        let bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.write(stdinDescriptor, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }

    func signal(_ number: Int32) { if isRunning { kill(pid, number) } }

    /// Whether the child still runs (reaps it, once, when it has ended).
    var isRunning: Bool {
        reaped.withLock { status in
            guard status == nil else { return false }
            var raw: Int32 = 0
            let result = waitpid(pid, &raw, WNOHANG)
            guard result == pid else { return result == 0 }
            // WIFEXITED / WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
            status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            return false
        }
    }

    /// Waits for the exit (at most `timeout`); `nil` if it is still running.
    func exitStatus(timeout: Duration = .seconds(30)) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while isRunning, ContinuousClock.now < deadline, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(20))
        }
        guard !isRunning else { return nil }
        // What it wrote last may still be in the pipes: a test reads `stderr` right after this
        // (seen once on a busy machine: exit 1 observed, its one error line not yet read).
        let drained = ContinuousClock.now + .seconds(2)
        while !(stdoutLines.isComplete && stderrLines.isComplete), ContinuousClock.now < drained {
            try? await Task.sleep(for: .milliseconds(5))
        }
        return reaped.withLock { $0 }
    }

    /// The first stdout line (as JSON) after `index` that satisfies `matches`, waiting at most `timeout`.
    func line(
        after index: Int = 0, timeout: Duration = .seconds(30), where matches: ([String: Any]) -> Bool
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

    func terminate() { signal(SIGTERM) }

    /// Reads `descriptor` to its end on a thread of its own, line by line, then closes it.
    private static func collect(
        _ descriptor: Int32, into lines: LineBuffer, pausingAfter marker: String? = nil,
        until resumed: DispatchSemaphore? = nil
    ) {
        let thread = Thread {
            var marker = marker
            defer {
                close(descriptor)
                lines.complete()
            }
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
                    if let text = marker, line.contains(text) {
                        marker = nil
                        _ = resumed?.wait(timeout: .now() + 120)  // bounded: a failed test still ends
                    }
                }
            }
        }
        thread.start()
    }
}

/// Lines collected from a child's output, shared between its reader thread and the test.
final class LineBuffer: Sendable {
    private let lines = Mutex<[String]>([])
    private let ended = Atomic<Bool>(false)
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
    /// The reader met the end of the pipe: every line the child wrote is in `all`.
    func complete() { ended.store(true, ordering: .releasing) }
    var isComplete: Bool { ended.load(ordering: .acquiring) }
}
