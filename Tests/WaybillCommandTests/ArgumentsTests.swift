import Foundation
import Testing

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
