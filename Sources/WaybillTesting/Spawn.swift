import Foundation

#if canImport(Glibc)
// Public: `posix_spawn_file_actions_t` is in `start`'s signature.
public import Glibc
#endif

/// Starts child processes with `posix_spawn`, every descriptor above stderr closed in the child.
///
/// Tests start children in two ways (`ChildProcess.run` here, the `waybill` executable in the API
/// tests); both need the same start, so it lives here once. Foundation's `Process` is avoided by
/// both: its `run()` crashed the test process now and then, and it learns of an exit through a
/// descriptor the child inherits (a daemonising child keeps it, so the wait never ends).
/// ```swift
/// let pid = try Spawn.start("/bin/true", []) { actions in
///     posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
/// }
/// ```
public enum Spawn {
    /// `posix_spawn` failed; `code` is its error number.
    public struct Failure: Error, CustomStringConvertible {
        public var code: Int32
        public var description: String { String(cString: strerror(code)) }
    }

    /// Starts `executable` (an absolute path) with `arguments` and `environment` (this process's
    /// when nil).
    ///
    /// `redirect` sets up the child's stdin, stdout and stderr; every descriptor from 3 up is then
    /// closed in the child, so it holds none of the test process's pipes and sockets open.
    /// - Returns: the child's pid (the caller reaps it with `waitpid`).
    /// - Throws: `Failure` when `posix_spawn` fails.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        redirect: (inout posix_spawn_file_actions_t) -> Void
    ) throws(Failure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        redirect(&actions)
        _ = closeFrom?(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { envp?.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = envp.map { posix_spawn(&pid, executable, &actions, nil, argv, $0) } ?? posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard spawned == 0 else { throw Failure(code: spawned) }
        return pid
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which Swift's Glibc module
    /// does not import: looked up at run time.
    private static let closeFrom: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? =
        {
            guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
            else { return nil }
            return unsafeBitCast(
                symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
        }()
}
