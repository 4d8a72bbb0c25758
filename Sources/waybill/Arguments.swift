import Foundation

/// Hand-written flag parsing: `--name value`, `--name=value`, `--flag`; each flag may also come from
/// an environment variable (`WAYBILL_<NAME>`, dashes as underscores). Flags beat the environment.
struct Arguments {
    struct Problem: Error, CustomStringConvertible {
        var description: String
    }

    private var values: [String: String] = [:]
    private var switches: Set<String> = []
    private var switchedOff: Set<String> = []
    private let environment: [String: String]

    /// - Parameter known: the value flags this command takes; `switches` take no value.
    init(_ arguments: [String], values known: Set<String>, switches knownSwitches: Set<String> = [],
         environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        self.environment = environment
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else { throw Problem(description: "unexpected argument '\(argument)'") }
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
                case nil, "1", "true", "yes":
                    switches.insert(name)
                    switchedOff.remove(name)
                case "0", "false", "no":
                    switches.remove(name)
                    switchedOff.insert(name)  // beats the environment, as a flag does
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

    func string(_ name: String, default fallback: String) -> String { string(name) ?? fallback }

    func int(_ name: String, default fallback: Int) throws -> Int {
        guard let text = string(name) else { return fallback }
        guard let value = Int(text) else { throw Problem(description: "--\(name) must be a whole number, not '\(text)'") }
        return value
    }

    func flag(_ name: String) -> Bool {
        if switches.contains(name) { return true }
        if switchedOff.contains(name) { return false }
        let env = environment[Self.environmentName(name)]?.lowercased()
        return env == "1" || env == "true" || env == "yes"
    }
}
