public import Foundation

/// Everything `waybill serve` can be told. Every field has a working default; the executable reads
/// flags and `WAYBILL_*` environment variables into it.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    /// 0 = any free port (tests).
    public var port = 8080
    public var maxBodyBytes = 1 << 20
    /// Whether an order write that arrives while no other request is running is committed on the
    /// service thread (embedded store only; docs/DESIGN.md, "Writes on the service thread").
    public var inlineWrites = true
    /// Protocol ping interval for WebSockets; a socket that has not answered by its next turn is closed
    /// (later while its ping is still behind unacknowledged output: `HeartbeatWheel`).
    public var pingInterval: Duration = .seconds(25)
    /// Outbound bytes a socket may have queued before it is closed with 4008.
    public var maxQueuedBytesPerSocket = 1 << 20
    /// PBKDF2 iterations for new password hashes (≥ 210,000 in production; tests lower it).
    public var passwordIterations = 210_000
    /// How long an API token works after login (`--token-days`, default 30 days); then 401.
    public var tokenLifetime: Duration = .seconds(30 * 86_400)
    /// How long a dispatcher's API token may go unused before it stops working
    /// (`--token-idle-hours`, default 12 hours; `nil`: no limit); then 401.
    public var tokenIdleLimit: Duration? = .seconds(12 * 3_600)
    /// When set, `GET /metrics` requires `Authorization: Bearer <metricsToken>` (`--metrics-token`);
    /// otherwise it answers only a loopback caller without `X-Forwarded-For` whose `Host` names this
    /// machine (403 for anyone else; `Routes.requireLocal`).
    public var metricsToken: String?
    /// Threads that run password hashing; `nil` = one fewer than the cores, at least one.
    public var keyStretchingThreads: Int?
    /// Password checks that may wait for a thread; more logins at once get 503 `overloaded`
    /// with `Retry-After: 1`. Small on purpose: each waiting check costs ~0.1 s of a core.
    public var keyStretchingQueueLimit = 8
    /// A password check still waiting for a thread after this long is refused (503 `overloaded`)
    /// rather than run: its client has most likely given up by then.
    public var keyStretchingMaxWait: Duration = .seconds(1)
    /// Failed logins allowed per email, and per client address (the socket's peer), in `loginWindow`.
    public var loginAttemptsPerEmail = 10
    public var loginAttemptsPerAddress = 50
    /// Reverse proxies (their addresses as the server sees them, e.g. "127.0.0.1") whose last
    /// `X-Forwarded-For` entry is taken as the client's address (`ClientAddress`). Empty: the peer.
    public var trustedProxies: Set<String> = []
    public var loginWindow: Duration = .seconds(300)
    /// How long delivered events stay replayable.
    public var outboxRetention: Duration = .seconds(7 * 86_400)
    public var pruneInterval: Duration = .seconds(3600)
    /// How long an `Idempotency-Key` record (and its stored response) is kept after it was last
    /// written. SPEC §2 asks for at least 24 h; 48 h leaves a day of margin over the client's
    /// 24 h give-up age (`ActionQueuePolicy.maxAge`, measured on the device's clock, which can be
    /// set back), so a retry never finds its key already forgotten and applies twice.
    public var idempotencyRetention: Duration = .seconds(2 * 86_400)
    /// An `Idempotency-Key` claimed this long ago with no response yet is taken over by a repeat
    /// (the node that claimed it most likely died); until then repeats get 409.
    public var idempotencyClaimTimeout: Duration = .seconds(30)
    /// Lifetime of a WebSocket ticket, at most 60 s.
    public var ticketLifetime: Duration = .seconds(30)
    /// How often logouts made on other nodes are looked for. SPEC §6 wants them acted on everywhere
    /// within 1 s, which a poll slower than about 750 ms breaks: longer only in tests.
    public var sessionPollInterval: Duration = .milliseconds(250)
    /// A broker publish slower than this is abandoned and retried.
    public var publishTimeout: Duration = .seconds(2)
    /// How often the relay leader polls the outbox for events committed by other processes. 1 s
    /// suits one SQLite process (its own commits take the fast path); with several nodes on one
    /// store, followers' commits wait for this poll, so set it short (10–20 ms: one indexed read).
    public var relayPollInterval: Duration = .seconds(1)
    /// The shortest time between two relay rounds that published (`OutboxRelay.Configuration`):
    /// zero alone on SQLite (every commit is handed to the relay); `ServeCommand` sets 5 ms with
    /// `--database-url` (a shared store, one node or several), so the leader reads and publishes
    /// the commits of all nodes together instead of one round per commit.
    public var relayMinimumRoundInterval: Duration = .zero
    /// This node's name among several (e.g. the host name): added to every log line as `node=…`
    /// and exported as `waybill_node_info{node="…"} 1`. `nil` for a single node.
    public var nodeID: String?
    /// A resume that would replay more events than this gets `reset` instead.
    public var maxReplayEvents = 10_000
    /// Bounds on memory and tasks (docs/HARDENING.md, item 3): WebSockets authenticating at once
    /// (more are closed with 1013), how long one may take (then 1013), replay queries at once
    /// (more: 1013), and work waiting for the network thread (past it every WebSocket gets 1013).
    public var maxConcurrentSocketAuthentications = 1024
    public var socketAuthenticationTimeout: Duration = .seconds(10)
    public var maxConcurrentReplays = 64
    /// WebSockets one user may have open on one node (more: 1013).
    public var maxSocketsPerUser = 32
    /// API requests one user may make per second on one node, after a burst of `userRequestBurst`
    /// (more: 429 `rate_limited`; `UserRequestLimiter`). 0: no limit. One budget for all of the
    /// user's tabs and devices: a busy panel tab asks about 10 times a second (docs/HARDENING.md).
    public var userRequestsPerSecond = 200
    public var userRequestBurst = 400
    public var maxQueuedServiceWork = 100_000
    /// How long shutdown waits for sockets to flush and close.
    public var shutdownDrain: Duration = .seconds(3)
    /// How long shutdown waits for HTTP requests already begun (bodies arriving, handlers running,
    /// answers going out): longer than a store call's 5 s budget, so a write's outcome is answered.
    public var requestDrain: Duration = .seconds(6)
    /// How long shutdown keeps kept-alive connections with no request in hand for their client (a
    /// load balancer) to close, answering what arrives on them (`HTTPServerConfiguration`'s
    /// `idleConnectionDrain`). `waybill serve` sets 5 s on PostgreSQL (a node behind a balancer).
    public var idleConnectionDrain: Duration = .zero
    /// Idle kept-alive connections are closed after this long (`--keep-alive-seconds`).
    public var keepAliveTimeout: Duration = .seconds(5)
    /// The web panel's files; `nil` = the copy bundled with the module.
    public var webDirectory: URL?

    public init() {}
}
