import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A throwaway PostgreSQL server for tests: its own data directory (in memory when there is
/// room: `TestClusterFolders`), listening on 127.0.0.1 and a free port below 32768 (Linux hands
/// out ephemeral ports above it, which a restart could then lose to a client socket), trust
/// authentication, user `waybill`.
///
/// Tests that only need a database use ``shared()`` (one server per test process, stopped at
/// exit) and ``createDatabase()`` per test; tests that stop, kill or freeze the server start
/// their own. When `WAYBILL_TEST_DATABASE_URL` is set, ``shared()`` uses that server instead.
///
/// ```swift
/// let url = try PostgresServer.shared().createDatabase()
/// let store = try PostgresOrderStore(url: url)
/// ```
public final class PostgresServer: Sendable {
    public enum StopMode: String, Sendable {
        /// Like a crash: backends are killed, clients see the connection drop.
        case immediate
        /// Clients are disconnected, then a clean shutdown.
        case fast
    }

    /// The role every test connects as (superuser, no password).
    public let user: String
    /// The URL's password, percent-encoded as given (external servers only).
    private let password: String?
    public let host: String
    public let port: Int
    /// `nil` for a server this object does not manage (`WAYBILL_TEST_DATABASE_URL`).
    private let local: Local?

    /// Paths of a server this object started.
    private struct Local: Sendable {
        let directory: URL
        let binaries: URL
        var data: URL { directory.appendingPathComponent("data") }
        var sockets: URL { directory.appendingPathComponent("sockets") }
        var log: URL { directory.appendingPathComponent("server.log") }
    }

    /// Creates a cluster with `initdb` and starts it.
    /// - Throws: `PostgresServerError` when PostgreSQL is not installed or will not start.
    public init() throws {
        let binaries = try Self.findBinaries()
        // In memory when there is room (`TestClusterFolders`: the disk's ext4 made the group slow).
        let directory = URL(fileURLWithPath: TestClusterFolders.base())
            .appendingPathComponent(TestClusterFolders.prefix + UUID().uuidString.prefix(8), isDirectory: true)
        let local = Local(directory: directory, binaries: binaries)
        try FileManager.default.createDirectory(at: local.sockets, withIntermediateDirectories: true)
        try TestClusterFolders.claim(directory.path)
        if getuid() == 0 {
            // PostgreSQL refuses to run as root: the cluster belongs to the postgres user.
            try Self.run("/bin/chown", ["-R", "postgres:postgres", directory.path])
        }
        user = "waybill"
        password = nil
        host = "127.0.0.1"
        self.local = local
        // A cluster that never started leaves nothing behind (a review, 2026-12-07: its folder
        // stayed in /tmp after a failed initdb or five failed starts).
        do {
            try Self.runAsServerUser(
                binaries.appendingPathComponent("initdb").path,
                ["-D", local.data.path, "-A", "trust", "-U", user, "-E", "UTF8", "--locale=C", "--no-sync"])
        } catch {
            try? FileManager.default.removeItem(at: directory)
            throw error
        }
        var lastError: (any Error)?
        for _ in 0..<5 {
            let candidate = Self.freePort()
            do {
                try Self.start(local, port: candidate)
                port = candidate
                return
            } catch {
                lastError = error
            }
        }
        // A start that timed out may have left a server running on the folder. The server's log
        // goes into the error first: it is what says why (pg_ctl's own message points to it).
        _ = try? Self.runAsServerUser(
            binaries.appendingPathComponent("pg_ctl").path, ["-D", local.data.path, "-m", "immediate", "stop"])
        let log = (try? String(contentsOf: local.log, encoding: .utf8)).map { String($0.suffix(2000)) } ?? ""
        try? FileManager.default.removeItem(at: directory)
        throw PostgresServerError("could not start PostgreSQL: \(lastError.map { "\($0)" } ?? "")\nits log ends:\n\(log)")
    }

    /// A server this object does not manage, e.g. from `WAYBILL_TEST_DATABASE_URL`.
    private init(externalHost: String, port: Int, user: String, password: String?) {
        self.password = password
        self.host = externalHost
        self.port = port
        self.user = user
        self.local = nil
    }

    /// The URL of `database` on this server.
    public func url(database: String = "postgres") -> String {
        "postgresql://\(user)\(password.map { ":" + $0 } ?? "")@\(host):\(port)/\(database)"
    }

    /// Creates a new database and returns its URL: cheap (a file copy of the template), so each
    /// test gets its own.
    /// - Parameter template: the database to copy (nobody may be connected to it); `template1`,
    ///   an empty one, by default. Suites copy a migrated database to skip the schema DDL.
    public func createDatabase(template: String? = nil) throws -> String {
        let name = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(16)
        _ = try psql("CREATE DATABASE \(name)" + (template.map { " TEMPLATE \"\($0)\"" } ?? ""))
        return url(database: name)
    }

    /// Drops the database of `url` (made by ``createDatabase(template:)``), disconnecting
    /// whoever is still connected to it.
    public func dropDatabase(_ url: String) throws {
        guard let name = url.split(separator: "/").last, name.hasPrefix("t_") else {
            throw PostgresServerError("not a test database: \(url)")
        }
        try psql("DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
    }

    /// Runs `sql` with `psql` and returns its unaligned, tuples-only output (trimmed).
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        let binary = local?.binaries.appendingPathComponent("psql").path ?? "psql"
        return try Self.run(
            binary, ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", url(database: database), "-c", sql]
        )
        .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    // MARK: Failure injection (servers this object started)

    /// Starts the server again on the same port (after ``stop(mode:)`` or ``kill()``).
    public func start() throws {
        try Self.start(try managed(), port: port)
    }

    /// Stops the server with `pg_ctl stop -m mode`, waiting until it is down.
    public func stop(mode: StopMode = .fast) throws {
        let local = try managed()
        try Self.runAsServerUser(
            local.binaries.appendingPathComponent("pg_ctl").path,
            ["-D", local.data.path, "-m", mode.rawValue, "-w", "stop"])
    }

    /// SIGKILLs the postmaster and its backends: a crashed host. ``start()`` works afterwards
    /// (nothing is left attached to the old shared memory).
    public func kill() throws {
        for pid in try processTree().reversed() { send(SIGKILL, to: pid) }
    }

    /// SIGSTOPs the postmaster and its children: a hung host whose kernel still accepts TCP.
    public func freeze() throws {
        for pid in try processTree() { send(SIGSTOP, to: pid) }
    }

    /// Resumes what ``freeze()`` stopped.
    public func thaw() throws {
        for pid in try processTree() { send(SIGCONT, to: pid) }
    }

    /// Stops the server at once and deletes its directory. Idempotent.
    public func remove() {
        guard let local else { return }
        try? thaw()  // a frozen server would not react to the stop
        try? stop(mode: .immediate)
        try? FileManager.default.removeItem(at: local.directory)
    }

    // MARK: Shared server

    /// The test process's server, started on first use and removed at exit; or the server of
    /// `WAYBILL_TEST_DATABASE_URL` (`postgresql://user@host:port/…`) when it is set.
    public static func shared() throws -> PostgresServer { try sharedServer.get() }

    private static let sharedServer: Result<PostgresServer, any Error> = Result {
        if let text = ProcessInfo.processInfo.environment["WAYBILL_TEST_DATABASE_URL"], !text.isEmpty {
            guard let url = URLComponents(string: text), let host = url.host else {
                throw PostgresServerError("WAYBILL_TEST_DATABASE_URL is not a URL: \(text)")
            }
            return PostgresServer(
                externalHost: host, port: url.port ?? 5432, user: url.percentEncodedUser ?? "postgres",
                password: url.percentEncodedPassword)
        }
        let server = try PostgresServer()
        serverToRemoveAtExit = server
        atexit { serverToRemoveAtExit?.remove() }
        return server
    }

    // MARK: Internals

    private func managed() throws -> Local {
        guard let local else { throw PostgresServerError("this PostgreSQL server is not managed by the test") }
        return local
    }

    private func postmasterPID() throws -> pid_t {
        guard let pid = TestClusterFolders.postmasterPID(inData: try managed().data.path) else {
            throw PostgresServerError("postmaster.pid is missing or unreadable")
        }
        return pid
    }

    /// The postmaster and every process whose parent it is (from /proc).
    private func processTree() throws -> [pid_t] {
        TestClusterFolders.processTree(try postmasterPID())
    }

    /// `max_connections=1000`: the test groups open their stores at once (each holds writers,
    /// readers and a kept reader), and 300 ran out in a clean-clone CI run (2026-12-06:
    /// `OrdersConformanceTests` met SQLSTATE 53300, too many connections). Backends are started
    /// only for connections made, so the ceiling costs nothing until it is used.
    private static func start(_ local: Local, port: Int) throws {
        let options = [
            "-p \(port)", "-k \(local.sockets.path)", "-c listen_addresses=127.0.0.1", "-c fsync=off",
            "-c synchronous_commit=on", "-c full_page_writes=off", "-c max_connections=1000",
            "-c shared_buffers=32MB",
        ].joined(separator: " ")
        try runAsServerUser(
            local.binaries.appendingPathComponent("pg_ctl").path,
            ["-D", local.data.path, "-l", local.log.path, "-o", options, "-w", "-t", "30", "start"])
    }

    private static func findBinaries() throws -> URL {
        if let output = try? run("pg_config", ["--bindir"]) {
            let path = output.trimmingCharacters(in: .whitespacesAndNewlines)
            if FileManager.default.isExecutableFile(atPath: path + "/initdb") { return URL(fileURLWithPath: path) }
        }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let path = "/usr/lib/postgresql/\(version)/bin"
            if FileManager.default.isExecutableFile(atPath: path + "/initdb") { return URL(fileURLWithPath: path) }
        }
        throw PostgresServerError(
            "PostgreSQL is not installed (no initdb in pg_config --bindir or /usr/lib/postgresql/*/bin);"
                + " install it with scripts/install-deps.sh --test")
    }

    /// A port nobody listens on, between 15000 and 32767.
    private static func freePort() -> Int {
        for _ in 0..<50 {
            let port = Int.random(in: 15000...32767)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { continue }
            defer { close(fd) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            if bound == 0 { return port }
        }
        return Int.random(in: 15000...32767)
    }

    private static func runAsServerUser(_ executable: String, _ arguments: [String]) throws {
        if getuid() == 0 {
            guard getpwnam("postgres") != nil else {
                throw PostgresServerError(
                    "running as root needs the postgres user, which the postgresql package creates")
            }
            let runuser = ChildProcess.which("runuser") ?? "/usr/sbin/runuser"
            try run(runuser, ["-u", "postgres", "--", executable] + arguments)
        } else {
            try run(executable, arguments)
        }
    }

    /// Runs a program to completion; its output, or an error with its last lines.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String]) throws -> String {
        guard let path = executable.hasPrefix("/") ? executable : ChildProcess.which(executable) else {
            throw PostgresServerError("\(executable) is not installed")
        }
        do {
            return try ChildProcess.run(path, arguments)
        } catch let failure as ChildProcess.Failure {
            throw PostgresServerError(
                "\((executable as NSString).lastPathComponent) \(arguments.first ?? "") failed "
                    + "(\(failure.status)): \(failure.output.suffix(600))")
        }
    }
}

/// `kill(2)`, under another name: inside `PostgresServer` the name `kill` is its own method.
private func send(_ signal: Int32, to pid: pid_t) {
    _ = kill(pid, signal)
}

/// The server the test process removes at exit (`atexit` takes no closure context).
nonisolated(unsafe) private var serverToRemoveAtExit: PostgresServer?

/// Why a test PostgreSQL server could not be set up.
public struct PostgresServerError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
