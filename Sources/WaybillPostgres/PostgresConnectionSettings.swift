import Foundation
import WaybillDomain

/// libpq connection keywords, parsed once from a `postgresql://` URL.
///
/// The URL is parsed here rather than handed to libpq so that a numeric host becomes `hostaddr`
/// (no blocking DNS lookup on a worker thread) and every connection gets the timeouts the store
/// relies on, whatever the URL says.
struct PostgresConnectionSettings: Sendable {
    /// `(keyword, value)` pairs in the order libpq receives them.
    var keywords: [(String, String)]
    /// `host:port/database`, for error messages (never the password).
    var displayName: String

    /// Parses `postgresql://user[:password]@host[:port]/database[?keyword=value…]` (or `postgres://`).
    /// - Throws: a one-line description of what is wrong with the URL.
    init(url text: String, applicationName: String) throws(PostgresURLError) {
        guard let components = URLComponents(string: text) else { throw PostgresURLError("not a URL") }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgresql" || scheme == "postgres" else {
            throw PostgresURLError("the scheme must be postgresql:// or postgres://")
        }
        guard let host = components.host, !host.isEmpty else { throw PostgresURLError("no host") }
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw PostgresURLError("port \(port) is out of range") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw PostgresURLError("the path must name one database (…/waybill)")
        }
        guard let user = components.user, !user.isEmpty else { throw PostgresURLError("no user name") }

        var keywords: [(String, String)] = [
            (Self.isNumericAddress(bareHost) ? "hostaddr" : "host", bareHost), ("port", String(port)),
            ("dbname", database), ("user", user),
        ]
        if let password = components.password { keywords.append(("password", password)) }
        let reserved: Set<String> = ["host", "hostaddr", "port", "dbname", "user", "password"]
        for item in components.queryItems ?? [] where !reserved.contains(item.name) {
            keywords.append((item.name, item.value ?? ""))
        }
        keywords.append(("application_name", applicationName))
        keywords.append(("client_encoding", "UTF8"))
        self.keywords = keywords
        self.displayName = "\(bareHost):\(port)/\(database)"
    }

    /// These settings with `extra` added, replacing keywords of the same name, except `options`:
    /// the operator's (`?options=-c search_path=…` in the URL) are kept, and ours follow them,
    /// so that for a setting both name ours wins (PostgreSQL applies the last `-c`).
    func with(_ extra: [(String, String)]) -> PostgresConnectionSettings {
        var copy = self
        let names = Set(extra.map(\.0))
        let given = keywords.last { $0.0 == "options" }?.1
        copy.keywords =
            keywords.filter { !names.contains($0.0) }
            + extra.map { name, value in
                guard name == "options", let given, !given.isEmpty else { return (name, value) }
                return (name, given + " " + value)
            }
        return copy
    }

    /// The pool's server-side bounds on one statement and one lock wait; a transaction lowers them
    /// to what its call has left (`PostgresTransactionRunner.begin(deadline:)`).
    static let statementTimeout: Duration = .seconds(4)
    static let lockTimeout: Duration = .seconds(2)

    /// Pool connections (field notes §2): a 2 s `connect_timeout` (libpq does not enforce it on the
    /// non-blocking connects the store makes, which its own `connectTimeout` bounds instead),
    /// keepalives and a TCP user timeout as a backstop for calls outside the request path, and
    /// server-side timeouts so a stuck statement, lock wait or abandoned transaction ends by
    /// itself. Times are UTC.
    ///
    /// The server's own keepalives too (found by a review): a node that dies, or is cut off, after
    /// part of a pipeline arrived leaves its backend waiting to read the rest, holding the event
    /// counter's row lock. Neither `statement_timeout` (it stops after each Execute) nor
    /// `idle_in_transaction_session_timeout` (it starts only after a Sync) ends that wait, and with
    /// the system's default keepalive (two hours) every write of every node would time out on the
    /// lock until then. With these the backend finds the dead peer in about 10 s (on Linux
    /// `tcp_user_timeout` takes over from the probe count) and its lock goes.
    var forPool: PostgresConnectionSettings {
        readWrite.with([
            ("connect_timeout", "2"), ("keepalives", "1"), ("keepalives_idle", "5"), ("keepalives_interval", "2"),
            ("keepalives_count", "2"), ("tcp_user_timeout", "5000"),
            (
                "options",
                "-c statement_timeout=\(Self.statementTimeout.milliseconds) -c lock_timeout=\(Self.lockTimeout.milliseconds)"
                    + " -c idle_in_transaction_session_timeout=10000"
                    + " -c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=2"
                    + " -c tcp_user_timeout=10000"
                    + " -c TimeZone=UTC"
            ),
        ])
    }

    /// The lease session (field notes §5): tighter socket timeouts on both ends, and an idle
    /// session timeout so a frozen holder's lock is freed after 5 s by the server itself.
    var forLease: PostgresConnectionSettings {
        readWrite.with([
            ("connect_timeout", "2"), ("keepalives", "1"), ("keepalives_idle", "2"), ("keepalives_interval", "1"),
            ("keepalives_count", "2"), ("tcp_user_timeout", "3000"),
            (
                "options",
                "-c tcp_keepalives_idle=3 -c tcp_keepalives_interval=1 -c tcp_keepalives_count=2"
                    + " -c tcp_user_timeout=4000 -c idle_session_timeout=5000 -c statement_timeout=4000"
                    + " -c TimeZone=UTC"
            ),
        ])
    }

    /// Connections only to a server that takes writes (`target_session_attrs=read-write`), unless
    /// the URL says otherwise: after a failover the old primary may come back as a standby under
    /// the same address, and a pool or lease session there would fail every write (or hold the
    /// relay's lease on a server no other node writes to).
    var readWrite: PostgresConnectionSettings {
        keywords.contains { $0.0 == "target_session_attrs" } ? self : with([("target_session_attrs", "read-write")])
    }

    private static func isNumericAddress(_ host: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

/// What is wrong with a PostgreSQL URL, in one line.
struct PostgresURLError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
