import Foundation
import WaybillAPI
import WaybillSQLite
import WaybillStorage

/// `waybill seed`: a new company with a dispatcher, drivers and assigned orders; logins as JSON.
enum SeedCommand {
    static let help = """
        Usage: waybill seed --out FILE [options]

        Creates a new company (on every run) with one dispatcher, N drivers and K orders assigned to
        each driver, and writes their logins and tokens as JSON (the format ../shared/bench reads).
        Safe while servers of the same version run on the same data directory or database (a newer
        version upgrades the schema first; an older server then refuses to start, and one already
        running may fail its writes: upgrade both).

        Options (each also read from the environment variable shown):
          --data-dir DIR             the server's data directory (WAYBILL_DATA_DIR, default ./waybill-data)
          --database-url URL         seed a PostgreSQL store instead (WAYBILL_DATABASE_URL)
          --demo                     the demo company of 'waybill demo' (known logins; ignores --drivers etc.);
                                     command line only, as is the store it then needs (--data-dir or
                                     --database-url): no WAYBILL_ variable is read for it
          --company NAME             company name (WAYBILL_COMPANY, default "Seeded Transport")
          --drivers N                number of drivers (WAYBILL_DRIVERS, default 3)
          --orders-per-driver K      orders per driver (WAYBILL_ORDERS_PER_DRIVER, default 2)
          --finished-per-driver H    completed and cancelled orders per driver, spread over the past six
                                     months, written in batches without events (WAYBILL_FINISHED_PER_DRIVER,
                                     default 0; 100 drivers × 1000 = a 100 000-order history in seconds)
          --out FILE                 where to write the JSON; - for stdout (WAYBILL_OUT). A new file or a
                                     regular file of yours (never through a symbolic link), made 0600
                                     before anything is written; one it created is removed if the seed fails
          --password-iterations N    PBKDF2 iterations, 1…10000000 (WAYBILL_PASSWORD_ITERATIONS, default 210000)
          --help                     show this text
        """

    static func run(_ argv: [String], environment: [String: String] = ProcessInfo.processInfo.environment) async throws {
        var args = try Arguments(
            argv, values: [
                "data-dir", "database-url", "company", "drivers", "orders-per-driver", "finished-per-driver", "out",
                "password-iterations",
            ],
            switches: ["demo"], environment: environment)
        // The demo's logins are published (README, the banner): never into a store, or with a
        // setting, that came from the environment. `WAYBILL_DEMO=1` turned it on, and an exported
        // WAYBILL_DATABASE_URL received it (found by a review, 2026-12-07; `waybill demo` already
        // reads its data directory from the command line only).
        let demo = args.isSwitchedOnHere("demo")
        if demo {
            guard args.isGiven("data-dir") || args.isGiven("database-url") else {
                throw Arguments.Problem(
                    description: "seed --demo writes the demo's known logins: name the store on the command line (--data-dir or --database-url); WAYBILL_ variables are not read for it")
            }
            args = args.withoutEnvironment()
        }
        guard let out = args.string("out") else { throw Arguments.Problem(description: "--out FILE is required") }
        let drivers = try args.int("drivers", default: 3), perDriver = try args.int("orders-per-driver", default: 2)
        guard drivers >= 0, perDriver >= 0, drivers <= 10_000, perDriver <= 10_000 else {
            throw Arguments.Problem(description: "--drivers and --orders-per-driver must be 0…10000")
        }
        let finished = try args.int("finished-per-driver", default: 0)
        guard (0...100_000).contains(finished), drivers * finished <= 10_000_000 else {
            throw Arguments.Problem(description: "--finished-per-driver must be 0…100000 (at most 10 million orders in all)")
        }
        let store = try ServeCommand.openStore(args)
        defer { store.close() }
        var createdOut = false  // and removed again if the seed fails
        var outDescriptor: Int32 = -1
        defer { if outDescriptor >= 0 { close(outDescriptor) } }
        var seeded = false
        defer { if createdOut, !seeded { try? FileManager.default.removeItem(atPath: out) } }
        if out != "-" {
            // The passwords and tokens exist only in this file (the store keeps hashes): a path that
            // cannot be written is refused before anything is seeded (after the store opened: `--out`
            // may name a file in the data directory it creates). It was found out after the
            // commit, and a rerun made a second company (found by a review, 2026-12-05). Opened
            // without truncating: a seed that then fails leaves an earlier file as it was.
            // Not through a symbolic link, only a regular file of this user's, and 0600 whatever mode
            // an existing file had: the umask applies to new files only, and an existing file (made
            // by `touch`, by an older build, by another user in a shared directory) kept its mode,
            // readable by others with every password in it (found by a review, 2026-12-05).
            let existed = FileManager.default.fileExists(atPath: out)
            let descriptor = open(out, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
            guard descriptor >= 0 else { throw Arguments.Problem(description: "--out \(out) cannot be written") }
            outDescriptor = descriptor
            createdOut = !existed  // removed again below if anything fails before the seed is in it
            var info = stat()
            guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_uid == getuid() else {
                throw Arguments.Problem(description: "--out \(out) must be a regular file of this user's")
            }
            guard fchmod(descriptor, 0o600) == 0 else {
                throw Arguments.Problem(description: "--out \(out) cannot be made readable by its owner only (errno \(errno))")
            }
        }
        let seeder = Seeder(store: store, passwordIterations: try ServeCommand.passwordIterations(args, default: 210_000))
        let plan =
            demo
            ? DemoCommand.plan
            : .init(
                companyName: args.string("company", default: "Seeded Transport"), drivers: drivers,
                ordersPerDriver: perDriver, finishedPerDriver: finished)
        let result = try await seeder.seed(plan)
        seeded = true
        let json = try result.json()
        if out == "-" {
            Console.write(json + Data("\n".utf8))
        } else {
            // Through the descriptor checked above (not the path again).
            let handle = FileHandle(fileDescriptor: outDescriptor)  // not closing it: the defer above does
            guard ftruncate(outDescriptor, 0) == 0, (try? handle.write(contentsOf: json)) != nil, fsync(outDescriptor) == 0 else {
                throw Arguments.Problem(description: "--out \(out) could not be written (errno \(errno))")
            }
            Console.error(
                "seeded company \(result.companyID): 1 dispatcher, \(plan.drivers) drivers, "
                    + "\(plan.drivers * plan.ordersPerDriver) orders, "
                    + "\(plan.drivers * plan.finishedPerDriver) finished orders → \(out)")
        }
    }
}
