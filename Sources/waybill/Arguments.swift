import Foundation

/// Hand-written flag parsing: `--name value`, `--name=value`, `--flag`; each flag may also come from
/// an environment variable (`WAYBILL_<NAME>`, dashes as underscores). Flags beat the environment.
struct Arguments {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    private var values: [String: String] = [:]
    /// The switches given, on or off (`--json`, `--json=false`): they beat the environment.
    private var switches: [String: Bool] = [:]
    private let environment: [String: String]

    /// - Parameter known: the value flags this command takes; `switches` take no value.
    init(_ arguments: [String], values known: Set<String>, switches knownSwitches: Set<String> = [],
         environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.environment = environment
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            // Not echoed: a stray word is often a value whose flag was forgotten (a database URL with
            // its password, the second word of an unquoted password), and the message goes to
            // stderr and from there to the service's log (found by a review, 2026-12-05).
            guard argument.hasPrefix("--") else {
                throw Problem(
                    description: "unexpected argument #\(index + 1) (\(argument.count) characters): every setting is a --flag")
            }
            var name = String(argument.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            if knownSwitches.contains(name) {
                // `--insecure-http=no` must not turn it on (found by a review, 2026-12-04): a value,
                // if given, is read as the environment's is, and anything else is refused.
                switch value.map({ $0.lowercased() }) {
                case nil: switches[name] = true
                case let text? where Self.on.contains(text): switches[name] = true
                case let text? where Self.off.contains(text): switches[name] = false
                case let other?: throw Problem(description: "--\(name) takes no value (or true/false), not '\(other)'")
                }
            } else if known.contains(name) {
                if value == nil {
                    index += 1
                    // `--email --password secret` would take "--password" as the email and then
                    // echo the secret as an unexpected argument: a value never starts with "--"
                    // (write `--name=--value` for one that does).
                    guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                        throw Problem(description: "--\(name) needs a value")
                    }
                    value = arguments[index]
                }
                values[name] = value
            } else {
                throw Problem(description: "unknown option --\(name)")
            }
            index += 1
        }
    }

    static func environmentName(_ flag: String) -> String {
        "WAYBILL_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    }

    func string(_ name: String) -> String? { values[name] ?? environment[Self.environmentName(name)] }

    /// Whether `--name` was on the command line (not only in the environment).
    func isGiven(_ name: String) -> Bool { values[name] != nil }

    func string(_ name: String, default fallback: String) -> String { string(name) ?? fallback }

    func int(_ name: String, default fallback: Int) throws -> Int {
        guard let text = string(name) else { return fallback }
        guard let value = Int(text) else { throw Problem(description: "--\(name) must be a whole number") }
        return value
    }

    /// An integer setting that must lie in `range`; outside it the start is refused with the
    /// flag's name and range, since a value out of range broke the server quietly (see ServeCommand).
    func int(_ name: String, default fallback: Int, in range: ClosedRange<Int>) throws -> Int {
        let value = try int(name, default: fallback)
        guard range.contains(value) else {
            throw Problem(description: "--\(name) must be \(range.lowerBound)…\(range.upperBound)")
        }
        return value
    }

    func int(_ name: String, default fallback: Int, in range: PartialRangeFrom<Int>) throws -> Int {
        let value = try int(name, default: fallback)
        guard range.contains(value) else { throw Problem(description: "--\(name) must be ≥ \(range.lowerBound)") }
        return value
    }

    /// Whether the switch was turned on on the command line itself (its variable is not read).
    func isSwitchedOnHere(_ name: String) -> Bool { switches[name] ?? false }

    /// The same flags without the environment: for what must come from the command line only.
    func withoutEnvironment() -> Arguments {
        var copy = Arguments(environment: [:])
        copy.values = values
        copy.switches = switches
        return copy
    }

    private init(environment: [String: String]) { self.environment = environment }

    func flag(_ name: String) -> Bool {
        if let given = switches[name] { return given }
        return environment[Self.environmentName(name)].map { Self.on.contains($0.lowercased()) } ?? false
    }

    /// A switch's value, on the command line (`--json=true`) or in the environment (`WAYBILL_JSON=1`).
    private static let on: Set = ["1", "true", "yes"], off: Set = ["0", "false", "no"]
}
