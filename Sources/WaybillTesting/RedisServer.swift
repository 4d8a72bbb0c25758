import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway `redis-server` for tests: loopback, a free port below 32768, no persistence, its
/// own temp directory; killed at process exit if a test left it running.
///
/// Failure injection as in the notes (§10): `kill()` is SIGKILL (a crash), `freeze()` is SIGSTOP
/// (a hung host: the kernel still completes TCP handshakes, nothing answers), `start()` brings it
/// back on the same port.
/// ```swift
/// let redis = try RedisServer()
/// let broker = try RedisBroker(url: redis.url)
/// redis.kill(); try redis.start()
/// redis.stop()
/// ```
/// Ports come from 20000–31999: Linux hands out 32768–60999 to client sockets, and one such socket
/// once held a test server's port during a restart (notes §10).
public final class RedisServer: Sendable {
    /// The port, kept across `kill()`/`start()`.
    public let port: Int
    /// The temp directory it runs in (removed by `stop()`).
    public let directory: String
    private let pid = Mutex<pid_t?>(nil)

    /// `redis://127.0.0.1:<port>`.
    public var url: String { "redis://127.0.0.1:\(port)" }

    /// Starts a server on a free port and waits until it answers PING.
    /// - Throws: `RedisServerError` if `redis-server` is missing or never answers.
    public init() throws {
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-redis-XXXXXX").path
        var buffer = Array(template.utf8CString)
        guard let made = mkdtemp(&buffer) else { throw RedisServerError("cannot create a temp directory") }
        directory = String(cString: made)
        var lastError = RedisServerError("no free port")
        for _ in 0..<20 {
            let candidate = Int.random(in: 20000..<32000)
            guard Self.reservedPorts.withLock({ $0.insert(candidate).inserted }) else { continue }
            do {
                guard Self.isFree(candidate) else { throw RedisServerError("port \(candidate) is in use") }
                let child = try Self.launch(port: candidate, directory: directory)
                port = candidate
                pid.withLock { $0 = child }
                Self.running.withLock { $0[child] = directory }
                return
            } catch let error as RedisServerError {
                Self.reservedPorts.withLock { _ = $0.remove(candidate) }
                lastError = error
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
        throw lastError
    }

    deinit { stop() }

    /// Whether the process is running (possibly frozen).
    public var isRunning: Bool { pid.withLock { $0 != nil } }

    /// Starts it again on the same port after `kill()` (no-op if running).
    /// - Throws: `RedisServerError` if it does not answer PING within 5 s.
    public func start() throws {
        guard !isRunning else { return }
        let child = try Self.launch(port: port, directory: directory)
        pid.withLock { $0 = child }
        Self.running.withLock { $0[child] = directory }
    }

    /// SIGKILL: the server vanishes mid-conversation (clients read EOF).
    public func kill() {
        guard
            let child = pid.withLock({ pid in
                defer { pid = nil }; return pid
            })
        else { return }
        _ = Glibc.kill(child, SIGKILL)
        var status: Int32 = 0
        while waitpid(child, &status, 0) < 0 && errno == EINTR {}
        Self.running.withLock { _ = $0.removeValue(forKey: child) }
    }

    /// SIGSTOP: connections stay open and connects still succeed, but nothing is answered.
    public func freeze() { pid.withLock { if let child = $0 { _ = Glibc.kill(child, SIGSTOP) } } }

    /// SIGCONT after `freeze()`.
    public func thaw() { pid.withLock { if let child = $0 { _ = Glibc.kill(child, SIGCONT) } } }

    /// Kills the server and removes its directory. Idempotent.
    public func stop() {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
        Self.reservedPorts.withLock { _ = $0.remove(port) }
    }

    /// Sends one command over a fresh connection and returns the first line of the reply
    /// (`+PONG`, `:1`, `-ERR …`). Arguments are binary-safe.
    public func command(_ arguments: [[UInt8]], timeout: Duration = .seconds(2)) throws -> String {
        let connection = try RawConnection(port: port, timeout: timeout)
        try connection.send(Self.request(arguments))
        return try connection.readLine()
    }

    /// One command in Redis's wire format (RESP: an array of bulk strings).
    public static func request(_ arguments: [[UInt8]]) -> [UInt8] {
        var request = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            request += Array("$\(argument.count)\r\n".utf8) + argument + Array("\r\n".utf8)
        }
        return request
    }

    /// Sends one command whose reply is a bulk string (`CLIENT LIST`, `INFO`) and returns that text.
    public func bulkCommand(_ arguments: [String], timeout: Duration = .seconds(2)) throws -> String {
        let connection = try RawConnection(port: port, timeout: timeout)
        try connection.send(Self.request(arguments.map { Array($0.utf8) }))
        let head = try connection.readLine()
        guard head.hasPrefix("$"), let length = Int(head.dropFirst()), length >= 0 else {
            throw RedisServerError("\(arguments.first ?? "") answered \(head)")
        }
        return String(decoding: try connection.readBytes(length), as: UTF8.self)
    }

    /// PUBLISHes raw bytes (for hostile-payload tests) and returns how many subscribers got them.
    @discardableResult
    public func publish(_ payload: [UInt8], on channel: String) throws -> Int {
        let reply = try command([Array("PUBLISH".utf8), Array(channel.utf8), payload])
        guard reply.hasPrefix(":"), let receivers = Int(reply.dropFirst()) else {
            throw RedisServerError("PUBLISH answered \(reply)")
        }
        return receivers
    }

    // MARK: Process

    /// Servers still running (pid → directory), killed and removed by an `atexit` hook so a failed
    /// test leaves nothing behind. Process-wide by nature: `atexit` takes no context.
    private static let running: Mutex<[pid_t: String]> = {
        atexit {
            for (child, directory) in RedisServer.running.withLock({ $0 }) {
                _ = Glibc.kill(child, SIGKILL)
                _ = waitpid(child, nil, 0)
                try? FileManager.default.removeItem(atPath: directory)
            }
        }
        return Mutex([:])
    }()

    /// Ports of this process's servers, kept across `kill()`/`start()` so no other test takes one
    /// while its server is down.
    private static let reservedPorts = Mutex<Set<Int>>([])

    private static func launch(port: Int, directory: String) throws -> pid_t {
        guard
            let executable = ["/usr/bin/redis-server", "/usr/local/bin/redis-server", "/opt/homebrew/bin/redis-server"]
                .first(where: { FileManager.default.isExecutableFile(atPath: $0) })
        else { throw RedisServerError("redis-server not found (scripts/install-deps.sh --test installs it)") }
        let arguments = [
            executable, "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
            "--dir", directory, "--daemonize", "no", "--logfile", "\(directory)/redis.log",
        ]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let status = posix_spawn(&child, executable, &actions, nil, &argv, environ)
        guard status == 0 else { throw RedisServerError("posix_spawn redis-server failed (\(status))") }

        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            var exitStatus: Int32 = 0
            if waitpid(child, &exitStatus, WNOHANG) == child {
                throw RedisServerError("redis-server exited at start on port \(port) (see \(directory)/redis.log)")
            }
            if let answering = Self.processID(answeringOn: port) {
                if answering == child { return child }
                // Another server holds the port (a test in another process picked it meanwhile):
                // ours cannot bind and will exit, and talking to theirs would mix two tests.
                _ = Glibc.kill(child, SIGKILL)
                _ = waitpid(child, nil, 0)
                throw RedisServerError("port \(port) is held by another redis-server (pid \(answering))")
            }
            usleep(10_000)
        }
        _ = Glibc.kill(child, SIGKILL)
        _ = waitpid(child, nil, 0)
        throw RedisServerError("redis-server on port \(port) did not answer within 5 s")
    }

    /// The `process_id` from `INFO server` of whatever Redis answers on `port`, or nil if none does.
    private static func processID(answeringOn port: Int) -> pid_t? {
        guard let connection = try? RawConnection(port: port, timeout: .milliseconds(500)),
            (try? connection.send("INFO server\r\n")) != nil,
            let header = try? connection.readLine(), header.hasPrefix("$"), let length = Int(header.dropFirst()),
            length > 0, length < 1 << 20, let body = try? connection.readBytes(length)
        else { return nil }
        let line = String(decoding: body, as: UTF8.self).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("process_id:") }
        return line.flatMap { pid_t($0.dropFirst("process_id:".count)) }
    }

    /// Whether nothing listens on 127.0.0.1:`port` (a bind probe; the race is handled by retrying).
    private static func isFree(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}

/// A test Redis server could not be started.
public struct RedisServerError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
