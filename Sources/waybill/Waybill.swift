import Foundation

/// `waybill <command> [options]`: the one executable (server, seeding, demo, driver app).
@main
struct Waybill {
    static let commands: [(name: String, summary: String)] = [
        ("serve", "run the server (HTTP API, WebSocket, web panel)"),
        ("seed", "create a company with a dispatcher, drivers and orders; write their logins as JSON"),
        ("demo", "serve on the embedded default with a demo company seeded on first start"),
        ("driver", "the driver's terminal app"),
    ]

    static func main() async {
        // Everything this program creates is its user's alone: the database (password hashes,
        // emails, login attempts), `seed --out` (passwords and tokens), the driver's action queue.
        // Under the usual umask (022) they were readable by every local user.
        umask(0o077)
        var arguments = Array(CommandLine.arguments.dropFirst())
        guard let command = arguments.first, !command.hasPrefix("-") else {
            Console.out(usage)
            exit(arguments.contains { $0 == "--help" || $0 == "-h" } ? 0 : 2)
        }
        arguments.removeFirst()
        let wantsHelp = arguments.contains("--help") || arguments.contains("-h")
        do {
            switch command {
            case "serve": wantsHelp ? Console.out(ServeCommand.help) : try await ServeCommand.run(arguments)
            case "seed": wantsHelp ? Console.out(SeedCommand.help) : try await SeedCommand.run(arguments)
            case "demo": wantsHelp ? Console.out(DemoCommand.help) : try await DemoCommand.run(arguments)
            case "driver": wantsHelp ? Console.out(DriverCommand.help) : try await DriverCommand.run(arguments)
            case "help": Console.out(usage)
            default:
                // Shown only if it looks like a command word (it may be a URL with a password).
                let shown = command.count <= 20 && command.allSatisfy { $0.isLetter || $0 == "-" } ? "'\(command)'" : "(\(command.count) characters)"
                Console.error("waybill: unknown command \(shown)\n\n\(usage)")
                exit(2)
            }
        } catch let problem as Arguments.Problem {
            Console.error("waybill \(command): \(problem)\nRun 'waybill \(command) --help'.")
            exit(2)
        } catch {
            Console.error("waybill \(command): \(error)")
            exit(1)
        }
    }

    static var usage: String {
        var text = "Usage: waybill <command> [options]\n\nCommands:\n"
        for c in commands { text += "  \(c.name.padding(toLength: 8, withPad: " ", startingAt: 0)) \(c.summary)\n" }
        text += "\nRun 'waybill <command> --help' for the options of a command."
        return text
    }
}
