import Foundation
import Synchronization
@testable import WaybillAPI
import WaybillBroker
import WaybillDomain
import WaybillNetwork
import WaybillObservability
import WaybillSQLite
import WaybillStorage

/// The fixture's directory, for the exit handler (a C function pointer cannot capture it).
private let fixtureDirectory = Mutex<String?>(nil)

/// The real API over a real SQLite store in a temporary directory, built once per fuzz process:
/// the request pipeline in-process (`responder`, for `api-request` and `router`) and a running
/// server on a loopback port (for `http-wire`).
///
/// A company with a dispatcher, two drivers and a few orders is seeded so that authenticated
/// inputs reach the handlers. Logs are dropped (every input would log a request line).
final class ServerFixture: Sendable {
    static let shared: ServerFixture = blocking {
        do { return try await ServerFixture() } catch { fatalError("fuzz fixture: \(error)") }
    }

    let directory: URL
    let store: SQLiteOrderStore
    let routes: Routes
    let responder: APIResponder
    let server: WaybillServer
    /// Bearer tokens by identity: dispatcher, driver 1, driver 2. Renewed when an input logs one out.
    private let tokens: Mutex<[String]>
    private let users: [UserID]

    private init() async throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-fuzz-\(getpid())")
        try? FileManager.default.removeItem(at: directory)
        // The fixture lives as long as the process: its directory goes when the process exits
        // (each run used to leave one behind, about 1 MB).
        let path = directory.path
        fixtureDirectory.withLock { $0 = path }
        atexit {
            if let path = fixtureDirectory.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        }
        store = try SQLiteOrderStore(path: directory.appendingPathComponent("waybill.sqlite").path)
        let seeded = try await Seeder(store: store, passwordIterations: 1_000)
            .seed(.init(companyName: "Fuzz", drivers: 2, ordersPerDriver: 3, dispatcherPassword: "fuzz-password"))
        tokens = Mutex([seeded.dispatcherToken] + seeded.drivers.map(\.token))
        users = [UserID(seeded.dispatcher.id)] + seeded.drivers.map { UserID($0.id) }

        let clock = SystemWallClock(), metrics = Metrics(), logger = Logger(sink: { _ in })
        let pool = KeyStretchingPool(threads: 1, queueLimit: 8)
        let auth = Authenticator(
            store: store, clock: clock, hasher: PasswordHasher(iterations: 1_000, pool: pool), pool: pool,
            throttle: LoginThrottle(store: store, clock: clock))
        routes = Routes(
            orders: OrderService(store: store, clock: clock) { _ in }, authenticator: auth,
            health: HealthChecks(store: store, metrics: metrics, clock: clock),
            staticFiles: StaticFiles(directory: StaticFiles.bundled), metricsToken: nil, loggedOut: { _ in })
        responder = APIResponder(router: routes.router(), authenticator: auth, metrics: metrics, logger: logger)

        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.passwordIterations = 1_000
        configuration.shutdownDrain = .zero
        server = try await WaybillServer.start(
            configuration: configuration, store: store, broker: InProcessBroker(), logger: logger)
    }

    /// The `Authorization` value for identity `index % 4`: none, the dispatcher, driver 1, driver 2.
    func authorization(_ index: UInt8) -> String? {
        let i = Int(index % 4)
        return i == 0 ? nil : "Bearer " + tokens.withLock { $0[i - 1] }
    }

    /// Issues new tokens for everyone (an input may have logged a seeded user out; the next
    /// inputs should still reach the handlers as that user).
    func renewTokens() async {
        let now = Date()
        let fresh = try? await store.write { [users] tx in
            try users.map { user in
                let token = Secret.generate()
                try tx.insertToken(hash: token.hash, for: user, createdAt: now, expiresAt: now.addingTimeInterval(86_400))
                return token.value
            }
        }
        if let fresh { tokens.withLock { $0 = fresh } }
    }
}
