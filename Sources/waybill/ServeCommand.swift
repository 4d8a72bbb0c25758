import Foundation
import WaybillAPI
import WaybillBroker
import WaybillObservability
import WaybillPostgres
import WaybillRedis
import WaybillSQLite
import WaybillStorage

/// `waybill serve`: runs until SIGINT or SIGTERM, then shuts down gracefully.
enum ServeCommand {
    static let valueFlags: Set<String> = [
        "host", "port", "data-dir", "max-body-bytes", "ping-interval", "max-socket-queue-bytes", "max-sockets-per-user",
        "user-requests-per-second", "user-request-burst", "password-iterations", "retention-days", "ticket-seconds", "web-dir", "database-url", "redis-url", "redis-channel", "node-id",
        "token-days", "token-idle-hours", "metrics-token", "trusted-proxy", "inline-writes", "keep-alive-seconds",
    ]

    static let help = """
        Usage: waybill serve [options]

        Runs the Waybill server. By default on the embedded store: a SQLite file in the data directory
        and an in-process broker. With --database-url and --redis-url it is one node of a cluster:
        any number of nodes on the same PostgreSQL and Redis, behind a load balancer (docs/SCALING.md).
        Stops gracefully on SIGINT/SIGTERM: new connections are refused at once (a load balancer
        sends them to another node), sockets get 1001 after a flush (up to 3 s), requests already
        being handled get up to 6 s to answer; on PostgreSQL, idle kept-alive connections are kept
        up to 5 s for the balancer to close, what arrives on them is answered (the network's part of
        the stop may then take up to 11 s; the store closes after it).

        Options (each also read from the environment variable shown):
          --host ADDR                  address to listen on: a literal, localhost, or 0.0.0.0 for every
                                       interface, IPv6 too (WAYBILL_HOST, default 127.0.0.1)
          --port N                     TCP port, 0 = any free port (WAYBILL_PORT, default 8080)
          --data-dir DIR               where the SQLite database lives (WAYBILL_DATA_DIR, default ./waybill-data);
                                       not with --database-url on the command line (the flag beats WAYBILL_DATABASE_URL)
          --database-url URL           PostgreSQL instead of SQLite: postgresql://USER@HOST:PORT/DB (WAYBILL_DATABASE_URL)
          --redis-url URL              Redis as the broker between nodes: redis://HOST:PORT (WAYBILL_REDIS_URL)
          --redis-channel NAME         the pub/sub channel of this deployment (WAYBILL_REDIS_CHANNEL, default
                                       waybill:events); deployments sharing one Redis need one each: channels
                                       are server-wide, a /db in the URL does not separate them
          --node-id NAME               this node's name in logs and /metrics: 1…255 letters, digits, . _ -
                                       (WAYBILL_NODE_ID, default: none)
          --max-body-bytes N           request body limit (WAYBILL_MAX_BODY_BYTES, default 1048576)
          --ping-interval SECONDS      WebSocket ping interval, 1…3600 (WAYBILL_PING_INTERVAL, default 25)
          --keep-alive-seconds N       an idle kept-alive HTTP connection is closed after N seconds, 1…3600
                                       (WAYBILL_KEEP_ALIVE_SECONDS, default 5); behind a proxy that keeps its
                                       upstream connections, set it above the proxy's own idle timeout
          --max-socket-queue-bytes N   per-socket outbound limit before 4008 (WAYBILL_MAX_SOCKET_QUEUE_BYTES, default 1048576)
          --max-sockets-per-user N     WebSockets one user may have open on this node; one more is closed with
                                       1013 (WAYBILL_MAX_SOCKETS_PER_USER, default 32)
          --user-requests-per-second N API requests one user may make per second on this node, after a burst of
                                       --user-request-burst; past it 429 rate_limited with Retry-After
                                       (WAYBILL_USER_REQUESTS_PER_SECOND, default 200; 0 = no limit)
          --user-request-burst N       requests a user may make at once before that rate applies, ≥ 1
                                       (WAYBILL_USER_REQUEST_BURST, default 400)
          --password-iterations N      PBKDF2 iterations for new hashes, 1…10000000 (WAYBILL_PASSWORD_ITERATIONS, default 210000)
          --retention-days N           how long events stay replayable, 1…3650 (WAYBILL_RETENTION_DAYS, default 7)
          --ticket-seconds N           WebSocket ticket lifetime, 1…60 (WAYBILL_TICKET_SECONDS, default 30)
          --token-days N               API tokens expire N days after login, 1…3650 (WAYBILL_TOKEN_DAYS, default 30)
          --token-idle-hours N         a dispatcher's token unused for N hours stops working, 0…8760
                                       (WAYBILL_TOKEN_IDLE_HOURS, default 12; 0 = no limit; drivers' never do)
          --metrics-token TOKEN        /metrics then requires "Authorization: Bearer TOKEN" (WAYBILL_METRICS_TOKEN;
                                       default: /metrics answers only on this machine: a loopback peer
                                       without X-Forwarded-For, with a Host naming this machine)
          --trusted-proxy ADDRS        reverse proxies (comma-separated addresses, e.g. 127.0.0.1) whose last
                                       X-Forwarded-For entry is the client's address for the login throttle
                                       (WAYBILL_TRUSTED_PROXY; default: none, the connection's peer counts)
          --web-dir DIR                serve the web panel from DIR (it must hold index.html) instead of the bundled copy (WAYBILL_WEB_DIR)
          --inline-writes on|off       commit an order write on the service thread when the server is otherwise
                                       idle, saving two thread wake-ups (WAYBILL_INLINE_WRITES, default on;
                                       SQLite only; docs/DESIGN.md)
          --help                       show this text
        """

    static func run(_ argv: [String]) async throws {
        let args = try Arguments(argv, values: valueFlags)
        let configuration = try configuration(from: args)
        let logger = Logger()
        let store = try openStore(args)
        let broker = try openBroker(args, logger: configuration.nodeID.map { logger.adding(["node": $0]) } ?? logger)
        try await serve(configuration: configuration, store: store, broker: broker, logger: logger) { _ in }
    }

    /// `--password-iterations`: 0 made the first login with an unknown email stop the process
    /// (OpenSSL refuses a PBKDF2 of 0 iterations); past `PasswordHasher.maxIterations` a hash is
    /// refused as not one of ours.
    static func passwordIterations(_ args: Arguments, default value: Int = ServerConfiguration().passwordIterations) throws
        -> Int
    {
        try args.int("password-iterations", default: value, in: 1...PasswordHasher.maxIterations)
    }

    /// Whether the store is PostgreSQL: a database URL is given (flag or environment), and no
    /// `--data-dir` flag beats a URL from the environment.
    static func isPostgres(_ args: Arguments) -> Bool {
        args.string("database-url") != nil && !(args.isGiven("data-dir") && !args.isGiven("database-url"))
    }

    static func configuration(from args: Arguments) throws -> ServerConfiguration {
        var c = ServerConfiguration()
        c.host = args.string("host", default: c.host)
        // An empty host means "every interface" to the listener (`ListeningSocket`): an empty
        // `WAYBILL_HOST=` (an unset variable in a compose file) silently listened on 0.0.0.0.
        guard !c.host.trimmingCharacters(in: .whitespaces).isEmpty else {
            throw Arguments.Problem(description: "--host must not be empty (0.0.0.0 listens on every interface)")
        }
        c.port = try args.int("port", default: c.port, in: 0...65_535)
        // A node of a cluster runs behind a load balancer: at a stop it keeps its idle kept-alive
        // connections up to 5 s for the balancer to close (nginx's upstream keepalive_timeout 4 s,
        // docs/SCALING.md), answering what arrives on them, so a deploy costs no request. One node
        // alone has nobody to hand over to: it closes them at once (Ctrl-C is not held up).
        if isPostgres(args) { c.idleConnectionDrain = .seconds(5) }
        // Below a login's body every login was 413; above 1 GiB one request could hold the memory.
        c.maxBodyBytes = try args.int("max-body-bytes", default: c.maxBodyBytes, in: 4096...(1 << 30))
        // Above an hour no proxy keeps an idle socket open anyway; unbounded, a huge value trapped
        // converting the heartbeat's ticks, and 10⁸ s asked for gigabytes of wheel buckets.
        let pingSeconds = try args.int("ping-interval", default: 25, in: 1...3600)
        c.pingInterval = .seconds(pingSeconds)
        // Bounded like the ping interval, for the same wheel (`KeepAliveWheel`: one bucket per 0.1 s).
        let keepAliveSeconds = try args.int("keep-alive-seconds", default: 5, in: 1...3600)
        c.keepAliveTimeout = .seconds(keepAliveSeconds)
        // 0 closed every socket with 4008 as its `connected` frame was queued (and the apps reconnected
        // in a loop); a bound below one replayed page would do the same to every resume.
        c.maxQueuedBytesPerSocket = try args.int(
            "max-socket-queue-bytes", default: c.maxQueuedBytesPerSocket, in: 65536...(1 << 30))
        c.maxSocketsPerUser = try args.int("max-sockets-per-user", default: c.maxSocketsPerUser, in: 1...)
        c.userRequestsPerSecond = try args.int("user-requests-per-second", default: c.userRequestsPerSecond, in: 0...)
        c.userRequestBurst = try args.int("user-request-burst", default: c.userRequestBurst, in: 1...)
        c.passwordIterations = try Self.passwordIterations(args)
        // 0 or less would prune every relayed event at each run (resumes would all get `reset`);
        // a huge value overflowed the seconds and trapped at startup.
        let retentionDays = try args.int("retention-days", default: 7, in: 1...3650)
        c.outboxRetention = .seconds(retentionDays * 86_400)
        // 0 or less made every ticket expire as it was issued: each socket closed 4001 and the apps
        // stopped and asked for a new login. SPEC §2: at most 60 s.
        let ticketSeconds = try args.int("ticket-seconds", default: 30, in: 1...60)
        c.ticketLifetime = .seconds(ticketSeconds)
        let tokenDays = try args.int("token-days", default: 30, in: 1...3650)
        c.tokenLifetime = .seconds(tokenDays * 86_400)
        let idleHours = try args.int("token-idle-hours", default: 12, in: 0...8760)
        c.tokenIdleLimit = idleHours == 0 ? nil : .seconds(idleHours * 3_600)
        if let token = args.string("metrics-token") {
            // A short token is guessable; an empty one would be a typo that silently opens nothing.
            guard token.count >= 16 else { throw Arguments.Problem(description: "--metrics-token must be at least 16 characters") }
            c.metricsToken = token
        }
        if let proxies = args.string("trusted-proxy") {
            c.trustedProxies = Set(proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
            guard !c.trustedProxies.isEmpty, c.trustedProxies.allSatisfy({ ClientAddress.isAddress($0) }) else {
                throw Arguments.Problem(description: "--trusted-proxy takes IP addresses, comma-separated (e.g. 127.0.0.1)")
            }
        }
        if let web = args.string("web-dir") {
            // A typo served every page as 404 behind a healthy-looking start.
            guard FileManager.default.fileExists(atPath: (web as NSString).appendingPathComponent("index.html")) else {
                throw Arguments.Problem(description: "--web-dir \(web) has no index.html")
            }
            c.webDirectory = URL(fileURLWithPath: web)
        }
        if let node = args.string("node-id") {
            // It is a label value in /metrics, a log field and part of PostgreSQL's application name:
            // a quote, a backslash or a newline made the node's whole /metrics unreadable to
            // Prometheus, with nothing said (found by a review, 2026-12-07).
            let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
            // Up to 255: SCALING's unit names a node `%H-%i`, and a host name alone may have 64.
            guard (1...255).contains(node.count), node.allSatisfy(allowed.contains) else {
                throw Arguments.Problem(description: "--node-id must be 1…255 letters, digits, '.', '_' or '-'")
            }
            c.nodeID = node
        }
        switch args.string("inline-writes", default: "on") {
        case "on": c.inlineWrites = true
        case "off": c.inlineWrites = false
        default: throw Arguments.Problem(description: "--inline-writes must be on or off")
        }
        // On a shared database other nodes commit too, and only the lease holder relays: it finds
        // their events by polling the outbox (one index range read), so poll often. Alone on
        // SQLite every event is handed to the relay at commit; the poll is only a safety net.
        // Its rounds are at least 5 ms apart: at 1 000 writes/s a round per commit cost the leader
        // about a third of a core; together they cost it a few milliseconds of delivery at most.
        if case .postgres = try storeChoice(args) {
            c.relayPollInterval = .milliseconds(10)
            c.relayMinimumRoundInterval = .milliseconds(5)
        }
        return c
    }

    static func openStore(_ dataDirectory: String) throws -> SQLiteOrderStore {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
        return try SQLiteOrderStore(path: (dataDirectory as NSString).appendingPathComponent("waybill.sqlite"))
    }

    /// Which store the settings name.
    enum StoreChoice: Equatable {
        case postgres(url: String)
        case sqlite(directory: String)
    }

    /// PostgreSQL when `--database-url` is set, else the SQLite file in `--data-dir`, except that a
    /// `--data-dir` flag beats a `WAYBILL_DATABASE_URL` from the environment ("flags beat the
    /// environment": it used PostgreSQL, found by a review, 2026-12-04). Both in the environment:
    /// PostgreSQL, as before (`--data-dir` is then unused). Both as flags name two stores: refused
    /// (one was silently ignored; found by a review, 2026-12-05).
    static func storeChoice(_ args: Arguments, dataDirectoryDefault: String = "./waybill-data") throws -> StoreChoice {
        if args.isGiven("data-dir") && args.isGiven("database-url") {
            throw Arguments.Problem(description: "--data-dir (SQLite) and --database-url (PostgreSQL) name two stores: give one")
        }
        let directory = args.string("data-dir")
        if let url = args.string("database-url"), isPostgres(args) {
            return .postgres(url: url)
        }
        return .sqlite(directory: directory ?? dataDirectoryDefault)
    }

    /// The store `storeChoice` names, open. A bad URL or an unreachable server is one clear line
    /// (StoreError.unavailable), not a crash.
    static func openStore(_ args: Arguments, dataDirectoryDefault: String = "./waybill-data") throws -> any OrderStore {
        switch try storeChoice(args, dataDirectoryDefault: dataDirectoryDefault) {
        case .postgres(let url):
            let name = args.string("node-id").map { "waybill-\($0)" } ?? "waybill"
            return try PostgresOrderStore(url: url, applicationName: name)
        case .sqlite(let directory):
            return try openStore(directory)
        }
    }

    /// Redis when `--redis-url` is given, else the in-process broker (one node).
    static func openBroker(_ args: Arguments, logger: Logger) throws -> any Broker {
        guard let url = args.string("redis-url") else {
            if case .postgres = try storeChoice(args) {
                // Allowed (one node on PostgreSQL), but a second node would get other nodes'
                // events only by reading the store (the feed's checks, then its polling).
                logger.warning(
                    "--database-url without --redis-url: events reach other nodes' sockets only by reading the store (after two 5 s checks, every 100 ms); run one node, or give every node --redis-url")
            }
            return InProcessBroker()
        }
        let channel = args.string("redis-channel", default: "waybill:events")
        return try RedisBroker(url: url, channel: channel) { level, message, fields in
            let pairs = fields.sorted { $0.key < $1.key }
            var line = message
            for (key, value) in pairs { line += " \(key)=\(value)" }
            switch level {
            case .info: logger.info("redis", ["detail": line])
            case .warning: logger.warning("redis", ["detail": line])
            }
        }
    }

    /// Starts the server, calls `started` with it, and returns after a signal-driven graceful stop.
    static func serve(
        configuration: ServerConfiguration, store: any OrderStore, broker: any Broker, logger: Logger = Logger(),
        started: (WaybillServer) async throws -> Void
    ) async throws {
        let signals = ShutdownSignals()
        let server = try await WaybillServer.start(
            configuration: configuration, store: store, broker: broker, logger: logger)
        try await started(server)
        let signal = await signals.next()
        server.logger.info("signal received", ["signal": signal])
        await server.shutdown()
        store.close()
    }
}
