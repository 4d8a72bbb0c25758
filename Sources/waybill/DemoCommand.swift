import Foundation
import WaybillAPI
import WaybillBroker
import WaybillSQLite
import WaybillStorage

/// `waybill demo`: `serve` with a demo company seeded on first start, and a banner saying how to log in.
enum DemoCommand {
    static let dispatcherPassword = "demo-dispatcher"
    static let driverPassword = "demo-driver"

    static let help = """
        Usage: waybill demo [options]

        Serves Waybill on the embedded default (SQLite + in-process broker) and, on first start,
        seeds a demo company: dispatcher@demo.example.com / \(dispatcherPassword) and three drivers
        driver1…3@demo.example.com / \(driverPassword). Prints the URL and the logins.

        Takes the options of 'waybill serve' (see 'waybill serve --help') except --database-url and
        --redis-url: the demo runs on the embedded store (a cluster demo is 'make cluster'). Its
        data directory is ./waybill-demo-data or --data-dir DIR; WAYBILL_DATA_DIR is not read (a
        server's data directory must not get the demo's known logins).
        """

    static let demoDirectory = "./waybill-demo-data"

    /// `--data-dir` from the command line, else `./waybill-demo-data`: never `WAYBILL_DATA_DIR`.
    static func dataDirectory(_ args: Arguments) -> String {
        args.isGiven("data-dir") ? args.string("data-dir") ?? demoDirectory : demoDirectory
    }
    static let dispatcherEmail = "dispatcher@demo.example.com"

    static func run(_ argv: [String]) async throws {
        let args = try Arguments(argv, values: ServeCommand.valueFlags)
        // Accepted by `serve`, but the demo would silently ignore them: say so instead.
        for flag in ["database-url", "redis-url"] where args.string(flag) != nil {
            throw Arguments.Problem(
                description: "waybill demo runs on the embedded store: --\(flag) (or its WAYBILL_ variable) is not used; for a cluster demo run 'make cluster'")
        }
        let configuration = try ServeCommand.configuration(from: args)
        // From the command line only: a production `WAYBILL_DATA_DIR` exported in the shell got the
        // demo company, whose logins the README prints (found by a review, 2026-12-05).
        let dataDirectory = Self.dataDirectory(args)
        let store = try ServeCommand.openStore(dataDirectory)
        // Seeded unless its dispatcher exists. A marker file written after the seed let an
        // interrupted first start (or `seed --demo` into the same directory) fail every later start
        // on the taken emails; the seeder now writes the company and its people in one transaction.
        if try await store.read({ try $0.credentials(email: dispatcherEmail) }) == nil {
            let seeder = Seeder(store: store, passwordIterations: configuration.passwordIterations)
            _ = try await seeder.seed(plan)
        }
        try await ServeCommand.serve(configuration: configuration, store: store, broker: InProcessBroker()) { server in
            Console.out(banner(url: Self.url(host: configuration.host, port: server.port)))
        }
    }

    /// The panel's address for the banner: a wildcard host (every address) as this machine's
    /// loopback, an IPv6 address in brackets. `--host ::1` printed `http://::1:8080/`, which neither
    /// a browser nor the printed `waybill driver` line could use (found by a review, 2026-12-07).
    static func url(host: String, port: Int) -> String {
        let shown: String
        switch host {
        case "", "*", "0.0.0.0": shown = "127.0.0.1"
        case "::", "[::]": shown = "[::1]"
        default: shown = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        }
        return "http://\(shown):\(port)/"
    }

    /// The demo company: known logins, so the banner (and `make cluster`) can print them.
    static let plan = Seeder.Plan(
        companyName: "Demo Transport", drivers: 3, ordersPerDriver: 2, emailDomain: "demo.example.com",
        dispatcherPassword: dispatcherPassword, driverPassword: driverPassword)

    /// - Parameter program: how this binary was started (`make run` starts it by its build path,
    ///   which is not on the PATH: the printed command must work when pasted).
    static func banner(url: String, program: String = CommandLine.arguments.first ?? "waybill") -> String {
        """

        Waybill demo is running.
          Web panel:   \(url)
          API:         \(url)api/   (health: \(url)healthz)
          Dispatcher:  dispatcher@demo.example.com / \(dispatcherPassword)
          Drivers:     driver1@demo.example.com … driver3@demo.example.com / \(driverPassword)

          Try:  curl -s -X POST \(url)api/auth/login -H 'Content-Type: application/json' \\
                  -d '{"email":"dispatcher@demo.example.com","password":"\(dispatcherPassword)"}'
          Driver app in a terminal:
                WAYBILL_PASSWORD=\(driverPassword) \(program) driver --server \(url) --email driver1@demo.example.com
        Stop with Ctrl-C.

        """
    }
}
