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
        Usage: WAYBILL_PASSWORD=P waybill driver --server URL --email E [--json] [--state-dir DIR]

        The driver's app in a terminal: logs in, shows the driver's orders live (WebSocket with
        single-use tickets, resume after reconnects, 120 s polling as a safety net) and moves them.
        Actions are queued on disk and sent in order when the server is reachable (each with its own
        Idempotency-Key, so a retry is applied once); the status line shows how many are waiting.

        Options (each also read from the environment variable shown):
          --server URL       the Waybill server, e.g. http://127.0.0.1:8080 (WAYBILL_SERVER). Plain HTTP
                             only: a server on another machine is refused unless --insecure-http is
                             given (the password and token would cross the network unencrypted; reach
                             it through an SSH tunnel or a VPN instead)
          --email E          login email (WAYBILL_EMAIL)
          --password P       password (WAYBILL_PASSWORD; prefer the variable: other local users can
                             read a program's arguments, not its environment)
          --insecure-http    allow a server that is not on this machine over plain HTTP (WAYBILL_INSECURE_HTTP=1)
          --json             one JSON line per change instead of the screen (also when stdout is not a terminal;
                             WAYBILL_JSON=1). Either switch also takes =true or =false
          --state-dir DIR    where the offline action queue is kept, one file per login and server
                             (WAYBILL_STATE_DIR; default $XDG_STATE_HOME/waybill, else ~/.local/state/waybill);
                             one app per login and server at a time (a second one refuses to start)
          --help             show this text

        Commands (type them, one per line):
          open ID            show an order's detail (it then refreshes on every change)
          close ID           stop showing it
          accept ID | start ID | complete ID     move the order (accepted, in_progress, completed)
          stage ID SID       mark stage SID of order ID done
          document ID KIND NAME…                 attach a document (e.g. document 42 proof_of_delivery POD.pdf)
                             (these are queued: sent now when online, later when not; on an opened order
                             they name the version shown: if it changed meanwhile, the server refuses the
                             action and the order is reloaded; an action on a listed order also names
                             it by when it was created, so it never reaches another order given its id
                             after the server's data was restored)
          {"action":"status","order":ID,"status":"accepted"}      the same actions as JSON lines
          {"action":"complete_stage","order":ID,"stage":SID}
          {"action":"document","order":ID,"name":"POD.pdf","kind":"proof_of_delivery"}
          refresh            refetch the list now
          quit               leave (queued actions get up to 3 s to go out, then wait on disk for the next start)
        On a terminal, Ctrl-D leaves as quit does. When stdin is not a terminal (a script), its end
        does not: the app keeps following until quit, SIGINT or SIGTERM.

        JSON lines: {"kind":"list","orders":[…]}, {"kind":"detail","order":{…}}, {"kind":"detail_removed","id":ID},
        {"kind":"connection","state":"live"|"connecting"|"backing_off"|"polling_only"|"stopped",…},
        {"kind":"action","id":KEY,"action":…,"order":ID,…,"state":"waiting"|"sending"|"applied"|"refused",
        "reason":{…} (refused only; each refusal is reported once, also across restarts),"waiting":N},
        {"kind":"error","message":…}.
        Exit status 3 when the server refuses the login or the token, or the login is not a driver's; 1 when it cannot be reached
        (or fails, or rate-limits the login) at start, or another `waybill driver` holds the same queue; 2 for a mistake in
        the arguments.
        """

    /// Whether `host` names this machine: `localhost`, or a loopback address.
    static func isThisMachine(_ host: String) -> Bool {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if bare.lowercased() == "localhost" { return true }
        var v4 = in_addr(), v6 = in6_addr()
        if inet_pton(AF_INET, bare, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        if inet_pton(AF_INET6, bare, &v6) == 1 {
            let bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return bytes == Array(repeating: 0, count: 15) + [1]
        }
        return false
    }

    static func run(_ argv: [String]) async throws {
        let args = try Arguments(
            argv, values: ["server", "email", "password", "state-dir"], switches: ["json", "insecure-http"])
        guard let serverText = args.string("server"), let server = URL(string: serverText), let host = server.host
        else {
            throw Arguments.Problem(description: "--server URL is required (e.g. http://127.0.0.1:8080)")
        }
        if let port = server.port, !(1...65_535).contains(port) {
            throw Arguments.Problem(description: "--server has port \(port), out of range (1…65535)")
        }
        // An https:// server was reported as unreachable (exit 1: "worth retrying") for ever.
        guard server.scheme?.lowercased() == "http" else {
            throw Arguments.Problem(
                description: "--server must be an http:// URL: this app speaks plain HTTP only (for a server elsewhere, use an SSH tunnel)")
        }
        // This app has no TLS: a server elsewhere would get the password and every token in the
        // clear (found by a review, 2026-12-03). On this machine (or through a tunnel) that is fine.
        guard Self.isThisMachine(host) || args.flag("insecure-http") else {
            throw Arguments.Problem(
                description: "refusing to send the password and token unencrypted to \(host): this app speaks plain HTTP only; run it on the server's machine or through an SSH tunnel, or pass --insecure-http")
        }
        guard let email = args.string("email"), let password = args.string("password") else {
            throw Arguments.Problem(description: "--email and --password are required")
        }
        let view: any DriverView = args.flag("json") || isatty(1) == 0 ? JSONLinesView() : ScreenView(email: email)
        let stateDirectory = Self.stateDirectory(args)
        let storage = FileActionStorage(url: queueFile(in: stateDirectory, server: server, email: email))
        // One app per queue file: each keeps the queue in memory and writes it whole, so a second
        // instance for the same login would write over actions the first has not sent yet. Taken
        // before the login, so a refused second app leaves no token behind.
        let claim: ActionStorageClaim?
        do { claim = try storage.claim() } catch let busy as ActionStorageInUse {
            view.startFailed("another 'waybill driver' for this login and server is running (it holds \(busy.lockPath))")
            exit(1)
        } catch {
            view.startFailed("cannot lock the action queue \(storage.url.path): \(error)")
            exit(1)
        }
        defer { withExtendedLifetime(claim) {} }
        // Only the holder of the lock takes over a queue kept under an earlier version's name: a
        // second app that cannot run must not move a file under the running one, whose next save
        // would write over it (found by a review).
        Self.adoptLegacyQueue(in: stateDirectory, server: server, email: email)
        let api: HTTPOrdersAPI, user: DriverUser
        do {
            (api, user) = try await HTTPOrdersAPI.logIn(server: server, email: email, password: password, transport: SocketHTTPTransport())
        } catch let error as WaybillClientError {
            view.startFailed("login failed: \(error)")
            // 3 only when the server refused the login (a supervisor should not retry that); an
            // unreachable or failing server, or a rate limit, is worth trying again later: 1.
            let refused = error == .notAuthenticated || error == .notAllowed
                || (error == .rejected && error.status != 429 && error.status != 408)
            exit(refused ? 3 : 1)
        }
        // The app's list and actions are a driver's (its list asks for the driver's own orders and
        // its actions are the driver's moves); the panel likewise refuses drivers.
        guard user.role == "driver" else {
            view.startFailed("this app is for drivers: \(email) is a \(user.role); use the web panel")
            exit(3)
        }
        let loop = try WebSocketClientLoop()
        let session = DriverSession(
            api: api, transport: LwsEventTransport(loop: loop), actionStorage: storage, actionStorageClaim: claim)
        if await session.actionStorageUnreadable {
            view.error(
                "cannot read the action queue in \(storage.url.path): a file that cannot be decoded is kept as \(storage.unreadableURL.lastPathComponent) (or .unreadable.N beside earlier ones); one that cannot be read is read again before a new action is kept, and never written over")
        }
        await session.start()
        await DriverApp(session: session, view: view).run()
        // Leaving with actions still queued: give them a moment to go out (a script's last command
        // is often an action right before `quit`), then say what stays on disk for the next start.
        let deadline = ContinuousClock.now + DriverApp.drainOnExit
        while !(await session.pendingActions.isEmpty), ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(50))
        }
        let left = await session.pendingActions.count
        await session.stop()
        if left > 0 {
            view.error("\(left) action\(left == 1 ? "" : "s") not sent yet: kept in \(storage.url.path), sent at the next start")
        }
        loop.shutdown()
    }
}

extension DriverCommand {
    /// `--state-dir`, else `$XDG_STATE_HOME/waybill`, else `~/.local/state/waybill`.
    static func stateDirectory(_ args: Arguments) -> URL {
        if let dir = args.string("state-dir") { return URL(fileURLWithPath: dir) }
        if let xdg = ProcessInfo.processInfo.environment["XDG_STATE_HOME"], !xdg.isEmpty {
            return URL(fileURLWithPath: xdg).appendingPathComponent("waybill")
        }
        return FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".local/state/waybill")
    }

    /// One queue per login and server (keys are scoped to the user): `actions-<email>@<host>_<port>.json`.
    ///
    /// The email and host are lower-cased and every name of this machine is `localhost`: logins
    /// ignore case, and `127.0.0.1` and `localhost` reach the same server, so a restart that spells
    /// either another way must find the queue (and the lock) the last run left (found by a review,
    /// 2026-12-04: the actions waited in a file no later start read). A queue kept under the
    /// spelling of a version before this one is taken over by ``adoptLegacyQueue(in:server:email:)``.
    static func queueFile(in directory: URL, server: URL, email: String) -> URL {
        let host = server.host ?? "server"
        // `http://host` and `http://host:80` are one server (found by a review: two files, two locks).
        let port = server.port == 80 ? nil : server.port
        return file(in: directory, email.lowercased(), isThisMachine(host) ? "localhost" : host.lowercased(), port)
    }

    /// Moves a queue kept under the spelling of a version before this one (the login and host as
    /// typed) to ``queueFile(in:server:email:)`` when that one is absent. Only while holding the
    /// queue's lock.
    static func adoptLegacyQueue(in directory: URL, server: URL, email: String) {
        let url = queueFile(in: directory, server: server, email: email)
        let legacy = file(in: directory, email, server.host ?? "server", server.port)
        let files = FileManager.default
        if legacy != url, files.fileExists(atPath: legacy.path), !files.fileExists(atPath: url.path) {
            try? files.moveItem(at: legacy, to: url)
        }
    }

    private static func file(in directory: URL, _ email: String, _ host: String, _ port: Int?) -> URL {
        let name = "\(email)@\(host)_\(port.map(String.init) ?? "default")"
        let safe = String(name.map { $0.isLetter || $0.isNumber || "@._-".contains($0) ? $0 : "_" })
        return directory.appendingPathComponent("actions-\(safe).json")
    }
}

/// Wires the session's updates to the view and stdin's commands to the session.
struct DriverApp {
    let session: DriverSession
    let view: any DriverView
    /// How long `quit`, Ctrl-D or a signal wait for queued actions before leaving.
    static let drainOnExit: Duration = .seconds(3)

    func run() async {
        let session = self.session, view = self.view
        let signals = ShutdownSignals()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await update in await session.updates() {
                    view.show(update)
                    // Shown (or printed) once, then dismissed: the session keeps refusals until then,
                    // and every later start would show the same old ones again (found by a review).
                    if case .action(let action) = update, case .refused = action.state {
                        await session.dismissRefusal(action.id)
                    }
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
                // stdin ended: a terminal user pressed Ctrl-D; a script (or stdin at /dev/null) just
                // keeps following until a signal, which the task below waits for: an AsyncStream
                // may be awaited by one task only, a second `signals.next()` would trap.
                if isatty(0) != 0 { return }
                while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
            }
            group.addTask { _ = await signals.next() }
            await group.next()
            group.cancelAll()
        }
    }

    /// Runs one command line; `false` means quit.
    static func perform(_ line: String, on session: DriverSession, view: any DriverView) async -> Bool {
        do {
            switch try DriverCommandLine(line) {
            case .none: break
            case .quit: return false
            case .refresh: await session.refresh()
            case .open(let id):
                // Not awaited here: offline, the fetch waits for its timeout (30 s), and the next
                // command (an action to queue, `quit`) must not wait behind it. The detail reaches
                // the view through the session's updates.
                Task {
                    do { _ = try await session.detail(id) } catch { view.error("open \(id) failed: \(error)") }
                }
            case .close(let id): await session.closeDetail(id)
            case .action(let action):
                // Queued (and on disk) before this returns; the view reports each step as an action line.
                try await session.queue(action)
            }
        } catch let problem as DriverCommandLine.Problem {
            view.error(problem.description)
        } catch {
            view.error("\(line) failed: \(error)")
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
