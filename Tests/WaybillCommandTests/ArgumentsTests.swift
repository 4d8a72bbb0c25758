import Foundation
import Testing

@testable import waybill

struct ArgumentsTests {
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
}
