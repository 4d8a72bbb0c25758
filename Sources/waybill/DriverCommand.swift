import Foundation
import WaybillClient
import WaybillClientTransports
import WaybillNetwork

/// `waybill driver`: the driver's terminal app on `WaybillClient` (SPEC §5).
///
/// On a terminal it shows the live order list, opened orders and a status line; with `--json` (or
/// when stdout is not a terminal) it prints one JSON line per change. Either way it reads commands
/// from stdin, one per line, so a person or a script can drive it.
enum DriverCommand {
    static let help = """
        Usage: waybill driver --server URL --email E --password P [--json]

        The driver's app in a terminal: logs in, shows the driver's orders live (WebSocket with
        single-use tickets, resume after reconnects, 120 s polling as a safety net) and moves them.

        Options (each also read from the environment variable shown):
          --server URL       the Waybill server, e.g. http://127.0.0.1:8080 (WAYBILL_SERVER)
          --email E          login email (WAYBILL_EMAIL)
          --password P       password (WAYBILL_PASSWORD)
          --json             one JSON line per change instead of the screen (also when stdout is not a terminal)
          --help             show this text

        Commands (type them, one per line):
          open ID            show an order's detail (it then refreshes on every change)
          close ID           stop showing it
          accept ID | start ID | complete ID     move the order (accepted, in_progress, completed)
          stage ID SID       mark stage SID of order ID done
                             (on an opened order these name the version shown: if it changed meanwhile,
                             nothing is done, the order is reloaded and a "changed meanwhile" error shows)
          refresh            refetch the list now
          quit               leave

        JSON lines: {"kind":"list","orders":[…]}, {"kind":"detail","order":{…}},
        {"kind":"connection","state":"live"|"connecting"|"backing_off"|"polling_only"|"stopped",…},
        {"kind":"error","message":…}. Exit status 3 when the server refuses the login or the token.
        """

    static func run(_ argv: [String]) async throws {
        let args = try Arguments(argv, values: ["server", "email", "password"], switches: ["json"])
        guard let serverText = args.string("server"), let server = URL(string: serverText), server.host != nil else {
            throw Arguments.Problem(description: "--server URL is required (e.g. http://127.0.0.1:8080)")
        }
        guard let email = args.string("email"), let password = args.string("password") else {
            throw Arguments.Problem(description: "--email and --password are required")
        }
        let view: any DriverView = args.flag("json") || isatty(1) == 0 ? JSONLinesView() : ScreenView(email: email)
        let api: HTTPOrdersAPI
        do {
            (api, _) = try await HTTPOrdersAPI.logIn(server: server, email: email, password: password, transport: SocketHTTPTransport())
        } catch let error as WaybillClientError {
            view.error("login failed: \(error)")
            exit(3)
        }
        let loop = try WebSocketClientLoop()
        let session = DriverSession(api: api, transport: LwsEventTransport(loop: loop))
        await session.start()
        await DriverApp(session: session, view: view).run()
        await session.stop()
        loop.shutdown()
    }
}

/// Wires the session's updates to the view and stdin's commands to the session.
struct DriverApp {
    let session: DriverSession
    let view: any DriverView

    func run() async {
        let session = self.session, view = self.view
        let signals = ShutdownSignals()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await update in await session.updates() {
                    view.show(update)
                    if case .connection(.stopped(let reason)) = update, reason == .notAuthenticated || reason == .notAllowed {
                        view.error("stopped: \(reason == .notAuthenticated ? "the server no longer accepts this login" : "not allowed")")
                        exit(3)
                    }
                }
            }
            group.addTask {
                for await line in StandardInputLines.stream() {
                    if await DriverApp.perform(line, on: session, view: view) == false { return }
                }
                // stdin ended: a terminal user pressed Ctrl-D; a script just keeps following.
                if isatty(0) != 0 { return }
                _ = await signals.next()
            }
            group.addTask { _ = await signals.next() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Runs one command line; `false` means quit.
    static func perform(_ line: String, on session: DriverSession, view: any DriverView) async -> Bool {
        let words = line.split(separator: " ").map(String.init)
        guard let verb = words.first?.lowercased() else { return true }
        let numbers = words.dropFirst().compactMap { Int64($0) }
        do {
            switch (verb, numbers.count) {
            case ("quit", _), ("exit", _): return false
            case ("refresh", _): await session.refresh()
            case ("open", 1): _ = try await session.detail(OrderID(numbers[0]))
            case ("close", 1): await session.closeDetail(OrderID(numbers[0]))
            case ("accept", 1): try await session.changeStatus(of: OrderID(numbers[0]), to: .accepted)
            case ("start", 1): try await session.changeStatus(of: OrderID(numbers[0]), to: .inProgress)
            case ("complete", 1): try await session.changeStatus(of: OrderID(numbers[0]), to: .completed)
            case ("stage", 2): try await session.completeStage(StageID(numbers[1]), of: OrderID(numbers[0]))
            default: view.error("unknown command '\(line)' — try: open ID, accept ID, start ID, complete ID, stage ID SID, quit")
            }
        } catch let error as WaybillClientError where error.isStaleVersion {
            // The action named the version on screen and the order has moved on: say so plainly. The
            // session has already reloaded it, so the fresh state is on screen for the driver to decide again.
            let order = numbers.first.map(String.init) ?? "?"
            view.error("\(verb) not done: order \(order) was changed meanwhile and has been reloaded; check it, try again")
        } catch {
            view.error("\(verb) failed: \(error)")
        }
        return true
    }
}

/// Lines typed on stdin, read on their own thread (reading blocks).
enum StandardInputLines {
    static func stream() -> AsyncStream<String> {
        AsyncStream { continuation in
            let thread = Thread {
                while let line = readLine() { continuation.yield(line.trimmingCharacters(in: .whitespaces)) }
                continuation.finish()
            }
            thread.start()
        }
    }
}
