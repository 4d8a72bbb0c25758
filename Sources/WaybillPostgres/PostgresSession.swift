import Foundation

/// A worker thread's connection slot: the connection it currently has, reopened lazily.
///
/// Not `Sendable`: created, used and closed on its worker's thread only. A connection that broke
/// (`PQstatus` bad), or that was opened before the store last saw the server fail, is dropped and
/// replaced on the next call — which happens only once `PostgresHealth` admits calls again, so
/// reconnects follow its backoff instead of hammering a server that is down.
final class PostgresSession {
    let health: PostgresHealth
    private let settings: PostgresConnectionSettings
    private var connection: PostgresConnection?
    private var connectedGeneration = 0
    /// A connect that has not completed by then fails (a frozen server accepts TCP but never answers).
    let connectTimeout: Duration

    /// The product's bound on one connect (`PostgresOrderStore`'s `connectTimeout` by default).
    static let defaultConnectTimeout: Duration = .seconds(2)

    init(
        settings: PostgresConnectionSettings, health: PostgresHealth, connectTimeout: Duration = defaultConnectTimeout
    ) {
        self.settings = settings
        self.health = health
        self.connectTimeout = connectTimeout
    }

    /// A usable connection, opened now if needed (waiting at most until `deadline`).
    /// - Throws: `.connectFailed` or `.timedOut`; the caller reports them to `health`.
    func connection(deadline: ContinuousClock.Instant) throws(PostgresError) -> PostgresConnection {
        let generation = health.generation
        if let connection, connection.isUsable, connectedGeneration == generation { return connection }
        close()
        // The connect_timeout keyword is not enforced for non-blocking connects: bound it here.
        let opened = try PostgresConnection(settings, deadline: min(deadline, .now + connectTimeout))
        connection = opened
        connectedGeneration = generation
        return opened
    }

    /// Whether the session holds a connection a call could use now without connecting: open, of the
    /// current generation (no failure seen since it was opened), and not closed by the server while
    /// idle. Drops one that fails the check. Never waits.
    func holdsUsableConnection() -> Bool {
        guard let connection else { return false }
        if connectedGeneration == health.generation, connection.isStillOpenWhileIdle() { return true }
        close()
        return false
    }

    /// Drops the current connection (the server frees whatever it held).
    func close() {
        connection?.close()
        connection = nil
    }
}
