import Foundation
import Testing
import WaybillAPI

@testable import waybill

struct ArgumentsTests {
    /// A stray word is not repeated: it is often a value whose flag was forgotten (a database URL
    /// with its password, the second word of an unquoted password), and the message reaches the log.
    @Test func aStrayArgumentIsNotRepeated() {
        do {
            _ = try Arguments(["--port", "8080", "postgres://u:s3cret@db/w"], values: ["port"], environment: [:])
            Issue.record("accepted")
        } catch {
            #expect(!"\(error)".contains("s3cret"), "\(error)")
            #expect("\(error)".contains("#3"), "\(error)")
        }
    }

    /// `--insecure-http=no` turned the switch on (any value was ignored; found by a review).
    @Test func aSwitchReadsTheValueItIsGiven() throws {
        let known: Set<String> = ["json", "insecure-http"]
        #expect(try Arguments(["--insecure-http"], values: [], switches: known, environment: [:]).flag("insecure-http"))
        for on in ["true", "1", "yes", "TRUE"] {
            #expect(try Arguments(["--json=\(on)"], values: [], switches: known, environment: [:]).flag("json"))
        }
        for off in ["false", "0", "no", "No"] {
            #expect(try !Arguments(["--insecure-http=\(off)"], values: [], switches: known, environment: [:]).flag("insecure-http"))
        }
        #expect(throws: Arguments.Problem.self) {
            try Arguments(["--insecure-http=maybe"], values: [], switches: known, environment: [:])
        }
    }

    /// Flags beat the environment, also a switch turned off.
    @Test func aSwitchTurnedOffBeatsTheEnvironment() throws {
        let env = ["WAYBILL_JSON": "1"]
        #expect(try Arguments([], values: [], switches: ["json"], environment: env).flag("json"))
        #expect(try !Arguments(["--json=false"], values: [], switches: ["json"], environment: env).flag("json"))
    }

    /// `--data-dir` on the command line beats `WAYBILL_DATABASE_URL` in the environment (it used
    /// PostgreSQL), and the other way round; both in the environment is PostgreSQL, as before; both as flags is refused.
    @Test func theStoreNamedByAFlagBeatsOneFromTheEnvironment() throws {
        let known: Set<String> = ["data-dir", "database-url"]
        func choice(_ flags: [String], _ env: [String: String]) throws -> ServeCommand.StoreChoice {
            try ServeCommand.storeChoice(try Arguments(flags, values: known, environment: env))
        }
        let url = "postgresql://waybill@127.0.0.1/waybill"
        #expect(try choice(["--data-dir", "/d"], ["WAYBILL_DATABASE_URL": url]) == .sqlite(directory: "/d"))
        #expect(try choice(["--database-url", url], ["WAYBILL_DATA_DIR": "/d"]) == .postgres(url: url))
        #expect(try choice([], ["WAYBILL_DATABASE_URL": url]) == .postgres(url: url))
        #expect(try choice([], [:]) == .sqlite(directory: "./waybill-data"))
        // Two stores named on the command line: refused (`--data-dir` was silently unused).
        #expect(throws: Arguments.Problem.self) { try choice(["--data-dir", "/d", "--database-url", url], [:]) }
        #expect(try choice([], ["WAYBILL_DATA_DIR": "/d", "WAYBILL_DATABASE_URL": url]) == .postgres(url: url))
    }

    /// `waybill demo` never reads `WAYBILL_DATA_DIR`: a server's data directory exported in the
    /// shell got the demo company and its printed logins (found by a review, 2026-12-05).
    @Test func theDemoTakesItsDataDirectoryFromTheCommandLineOnly() throws {
        let env = ["WAYBILL_DATA_DIR": "/var/lib/waybill"]
        #expect(DemoCommand.dataDirectory(try Arguments([], values: ["data-dir"], environment: env)) == "./waybill-demo-data")
        #expect(DemoCommand.dataDirectory(try Arguments(["--data-dir", "/d"], values: ["data-dir"], environment: env)) == "/d")
    }
}

/// `seed --demo` writes the demo company, whose logins are published: only into a store named on
/// the command line, and only when `--demo` itself is there (a review, 2026-12-07: `WAYBILL_DEMO=1`
/// turned it on, and an exported `WAYBILL_DATA_DIR` or `WAYBILL_DATABASE_URL` received it).
struct SeedDemoTests {
    @Test func theDemoIsNeverSeededIntoAStoreFromTheEnvironment() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("waybill-seed-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let out = directory.appendingPathComponent("seed.json").path
        await #expect {
            try await SeedCommand.run(["--demo", "--out", out], environment: ["WAYBILL_DATA_DIR": directory.path])
        } throws: { error in
            "\(error)".contains("name the store on the command line")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path), "nothing was created")
    }

    @Test func theDemoSwitchIsReadFromTheCommandLineOnly() throws {
        let environment = ["WAYBILL_DEMO": "1"]
        let quiet = try Arguments([], values: [], switches: ["demo"], environment: environment)
        #expect(!quiet.isSwitchedOnHere("demo"))
        #expect(quiet.flag("demo"), "as any other switch, the variable alone turns flag() on")
        let given = try Arguments(["--demo"], values: [], switches: ["demo"], environment: [:])
        #expect(given.isSwitchedOnHere("demo"))
        let alone = try Arguments(["--data-dir", "d"], values: ["data-dir", "out"], environment: ["WAYBILL_OUT": "x"])
        #expect(alone.withoutEnvironment().string("out") == nil)
        #expect(alone.withoutEnvironment().string("data-dir") == "d")
    }
}

/// Settings that reach other programs' formats (a review, 2026-12-07).
struct SettingFormatTests {
    /// The node's name is a label in /metrics and a log field: a quote or a newline in it made the
    /// whole /metrics unreadable to Prometheus.
    @Test(arguments: ["eu\"1", "a\\b", "two\nlines", "", String(repeating: "n", count: 256), "space d"])
    func aNodeNameOutsideItsCharactersIsRefused(name: String) throws {
        let args = try Arguments([], values: ServeCommand.valueFlags, environment: ["WAYBILL_NODE_ID": name])
        #expect(throws: Arguments.Problem.self) { _ = try ServeCommand.configuration(from: args) }
    }

    @Test func aPlainNodeNameIsTaken() throws {
        let args = try Arguments(["--node-id", "eu-1.a_b"], values: ServeCommand.valueFlags, environment: [:])
        #expect(try ServeCommand.configuration(from: args).nodeID == "eu-1.a_b")
        // SCALING's unit: `%H-%i`, a 64-character host name and an instance.
        let unit = String(repeating: "h", count: 64) + "-1"
        let long = try Arguments(["--node-id", unit], values: ServeCommand.valueFlags, environment: [:])
        #expect(try ServeCommand.configuration(from: long).nodeID == unit)
    }

    /// The demo's banner prints an address a browser and `waybill driver` can use, whatever --host says.
    @Test func theDemoBannerURLIsUsableForEveryHost() {
        #expect(DemoCommand.url(host: "127.0.0.1", port: 8080) == "http://127.0.0.1:8080/")
        #expect(DemoCommand.url(host: "0.0.0.0", port: 8080) == "http://127.0.0.1:8080/")
        #expect(DemoCommand.url(host: "*", port: 8080) == "http://127.0.0.1:8080/")
        #expect(DemoCommand.url(host: "::", port: 8080) == "http://[::1]:8080/")
        #expect(DemoCommand.url(host: "::1", port: 8080) == "http://[::1]:8080/")
        #expect(DemoCommand.url(host: "localhost", port: 9) == "http://localhost:9/")
    }
}
