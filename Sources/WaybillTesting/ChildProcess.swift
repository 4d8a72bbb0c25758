import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Runs a program to completion with `posix_spawn` + `waitpid`.
///
/// Foundation's `Process` is not used here: it learns that a child exited through a descriptor
/// the child inherits, and `pg_ctl start` leaves the postmaster running with everything it
/// inherited, so the wait would never end. Here the child gets only stdin (/dev/null) and
/// stdout/stderr (a capture file): every other descriptor is closed in the child.
enum ChildProcess {
    struct Failure: Error {
        var status: Int32
        var output: String
    }

    /// Runs `executable` (an absolute path) with `arguments`; returns what it printed.
    /// - Throws: `Failure` when it exits with a non-zero status, `PostgresServerError` when it
    ///   cannot be started.
    static func run(_ executable: String, _ arguments: [String]) throws -> String {
        let capture = NSTemporaryDirectory() + "waybill-child-\(UUID().uuidString)"
        defer { unlink(capture) }
        let pid: pid_t
        do throws(Spawn.Failure) {
            pid = try Spawn.start(executable, arguments) { actions in
                posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
                posix_spawn_file_actions_addopen(&actions, 1, capture, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
            }
        } catch {
            throw PostgresServerError("cannot start \(executable): \(error)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: capture, encoding: .utf8)) ?? ""
        // WIFEXITED / WEXITSTATUS are macros: exited normally when the low 7 bits are 0.
        let exitStatus = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        guard exitStatus == 0 else { throw Failure(status: exitStatus, output: output) }
        return output
    }

    /// The absolute path of `name` on `PATH`, if any.
    static func which(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }
}
